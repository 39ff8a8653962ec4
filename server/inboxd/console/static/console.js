// The console's only script, and it is optional: every page works without it.
// It refreshes parts of a page in place (data-refresh="/path", data-every="seconds")
// lets one checkbox select every box of its form (data-select-all="name"), and follows a
// bulk operation's progress (data-progress="/bulk/operation.json?id=...", data-every="seconds").
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

// Each [data-field] inside takes the operation's figure of that name, as the server words it;
// a <progress> its done and matched. Once the operation has ended, the page reloads once,
// for its final figures without the Cancel form.
function followProgress(element) {
  const seconds = Number(element.dataset.every || "1");
  window.setTimeout(async () => {
    try {
      const answer = await fetch(element.dataset.progress, { credentials: "same-origin", cache: "no-store" });
      if (answer.status === 401) {
        element.insertAdjacentHTML("beforebegin", '<p class="error" role="alert">Signed out: reload to sign in.</p>');
        return;
      }
      if (answer.ok) {
        const operation = await answer.json();
        for (const field of element.querySelectorAll("[data-field]")) {
          const value = operation.shown[field.dataset.field];
          if (value !== undefined) field.textContent = value;
        }
        for (const bar of element.querySelectorAll("progress")) {
          bar.max = Math.max(operation.matched, 1);
          bar.value = operation.done + operation.skipped;
        }
        if (operation.state !== "RUNNING") {
          window.location.reload();
          return;
        }
      }
    } catch (error) {
      // The server may be restarting: try again at the next tick.
    }
    followProgress(element);
  }, seconds * 1000);
}

document.querySelectorAll("[data-refresh]").forEach(refreshLater);
document.querySelectorAll("[data-progress]").forEach(followProgress);
document.querySelectorAll("input[data-select-all]").forEach(wireSelectAll);
