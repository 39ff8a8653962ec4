// The console's only script, and it is optional: every page works without it.
// It refreshes parts of a page in place (data-refresh="/path", data-every="seconds")
// and lets one checkbox select every box of its form (data-select-all="name").
"use strict";

function refreshLater(element) {
  const seconds = Number(element.dataset.every || "5");
  window.setTimeout(async () => {
    if (!document.hidden) {
      try {
        const answer = await fetch(element.dataset.refresh, { credentials: "same-origin", cache: "no-store" });
        if (answer.status === 401) {
          element.insertAdjacentHTML("beforebegin", '<p class="error" role="alert">Signed out: reload to sign in.</p>');
          return;
        }
        if (answer.ok) {
          element.innerHTML = await answer.text();
          element.dataset.refreshed = new Date().toISOString();
        }
      } catch (error) {
        // The server may be restarting: try again at the next tick.
      }
    }
    refreshLater(element);
  }, seconds * 1000);
}

function wireSelectAll(box) {
  box.addEventListener("change", () => {
    for (const other of box.form.querySelectorAll(`input[type=checkbox][name="${box.dataset.selectAll}"]`)) {
      other.checked = box.checked;
    }
  });
}

document.querySelectorAll("[data-refresh]").forEach(refreshLater);
document.querySelectorAll("input[data-select-all]").forEach(wireSelectAll);
