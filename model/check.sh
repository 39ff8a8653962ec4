#!/usr/bin/env bash
# Checks every model with SPIN, exhaustively: each honest model must pass, and
# each bug switch must yield a counterexample against the invariant it breaks.
# A check that goes the wrong way prints its counterexample trail.
#
#   model/check.sh                  every check
#   model/check.sh claims.pml       the checks of one model
# Trails stay in model/out/<model>-<switch>/ (replay: cd there; spin -t -p -D<switch> <model>).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out="$here/out"
cc=${CC:-cc}
only=${1:-}

# model | switch (- for the honest model) | expected: pass, or the @inv the counterexample breaks
#       | optional: a pattern the narrative of some counterexample must match (all trails are searched)
CHECKS=(
  "claims.pml|-|pass"
  "claims.pml|UNFENCED_COMPLETE|stale_write_refused"
  "claims.pml|RECLAIM_KEEPS_OLD_CLAIM|one_current_claim"
  "claims.pml|RELEASE_WITHOUT_STATE|stale_write_refused"
  "claims.pml|RESCUE_GIVES_BACK_ATTEMPT|attempts_counted"
  "claims.pml|CLAIM_IGNORES_MAX_ATTEMPTS|dead_lettered_never_lost"
  "claims.pml|FENCE_FROM_ATTEMPT|fencing_tokens_increase"
  "actions.pml|-|pass"
  "actions.pml|TODAY_RULE|succeeded_stands|B: RecordActionOutcome\(INTENDED\) -> OK.*A: RecordActionOutcome\(FAILED\) -> OK; ledger FAILED by claim A.*B: RecordActionOutcome\(SUCCEEDED\) -> PRECONDITION"
  "actions.pml|OLDER_OUTCOME_OVERWRITES|succeeded_stands|A: RecordActionOutcome\(FAILED\) -> OK; ledger FAILED by claim A"
  "actions.pml|OLDER_SUCCEEDED_REFUSED|succeeded_stands"
  "actions.pml|INTENDED_CHECK_THEN_ACT|intended_needs_current_claim"
  "ordering.pml|-|pass"
  "ordering.pml|DELIVER|pass"
  "ordering.pml|SNAPSHOT_DECIDES|one_in_flight"
  "ordering.pml|RETRY_FREES_KEY|same_event_back_first"
  "ordering.pml|NO_STALE_CHECK|stale_never_applied"
  "ordering.pml|REPLAY_IGNORED|replay_delivered"
)

failures=0
printf '%-12s %-27s %-10s %12s %13s  %s\n' model switch result states transitions "invariant broken"

# The trail as a story: the model's own printf lines and the failed assertion.
narrative() {
  spin -t"${2:-}" $1 "$model" 2>&1 | grep -E '^\s+(w[0-9]|clock|rescuer|edge|operator|A|B): |Error: assertion' |
    sed -E 's/^\s+/      /; s/^spin: (.*), Error: assertion violated/      ** assertion violated at \1/' | awk '!seen[$0]++' || true
}

# The trail step by step (spin -t -p), trimmed to its last statements.
steps() {
  spin -t -p $1 "$model" 2>&1 | grep -E '^\s*[0-9]+:\s+proc' | tail -n 40 | cut -c1-160 || true
}

# The @inv tag on the line of the first failed assertion in the trail.
broken_invariant() {
  local line
  line=$(spin -t $1 "$model" 2>&1 | sed -nE 's/^spin: [^:]+:([0-9]+), Error: assertion violated.*/\1/p' | head -n1)
  [ -n "$line" ] || { echo "(no assertion: $(grep -m1 -oE 'invalid end state|errors: [0-9]+' pan.out || true))"; return; }
  sed -n "${line}p" "$model" | grep -oE '@inv [a-z_]+' | cut -d' ' -f2 || echo "(untagged line $line)"
}

for check in "${CHECKS[@]}"; do
  IFS='|' read -r model switch expect pattern <<<"$check"
  [ -z "$only" ] || [ "$only" = "$model" ] || continue
  dir="$out/${model%.pml}-$switch"
  rm -rf "$dir" && mkdir -p "$dir" && cp "$here/$model" "$dir/"
  cd "$dir"
  defs=""; [ "$switch" = "-" ] || defs="-D$switch"
  spin $defs -a "$model" >spin.out 2>&1 || { cat spin.out; exit 1; }
  # Bug switches find their counterexample in a few thousand states: -O0 compiles in a tenth of the time.
  if [ "$expect" = "pass" ]; then
    $cc -O2 -w -DSAFETY -DMEMLIM=2048 -o pan pan.c
    ./pan -m200000 >pan.out 2>&1 || true
  elif [ -n "$pattern" ]; then
    # Every counterexample, each with a trail, so the one named by the pattern can be found.
    $cc -O0 -w -DSAFETY -DMEMLIM=2048 -o pan pan.c
    ./pan -m200000 -c0 -e >pan.out 2>&1 || true
  else
    # The shortest counterexample (-i), so its story reads quickly.
    $cc -O0 -w -DSAFETY -DREACH -DMEMLIM=2048 -o pan pan.c
    ./pan -m200000 -i >pan.out 2>&1 || true
  fi
  states=$(sed -nE 's/^ *([0-9]+) states, stored.*/\1/p' pan.out | tail -n1)
  transitions=$(sed -nE 's/^ *([0-9]+) transitions.*/\1/p' pan.out | tail -n1)
  errors=$(sed -nE 's/.*errors: ([0-9]+).*/\1/p' pan.out | tail -n1)
  complete=yes; grep -q "Search not completed" pan.out && [ "$expect" = "pass" ] && complete=no

  if [ "$expect" = "pass" ]; then
    if [ "${errors:-1}" = "0" ] && [ "$complete" = yes ]; then
      printf '%-12s %-27s %-10s %12s %13s  %s\n' "$model" "$switch" ok "$states" "$transitions" "-"
    else
      printf '%-12s %-27s %-10s %12s %13s  %s\n' "$model" "$switch" FAILED "$states" "$transitions" "$(broken_invariant "$defs")"
      echo "    the honest model must pass. pan said:"; grep -E 'pan:|error|Search not' pan.out | head -n 5 | sed 's/^/      /'
      if [ -f "$model.trail" ]; then
        echo "    counterexample:"; narrative "$defs"
        echo "    last steps (spin -t -p):"; steps "$defs" | sed 's/^/      /'
      fi
      failures=$((failures + 1))
    fi
    continue
  fi

  got=""; trail_n=""
  if [ -n "$pattern" ]; then
    # Trails are numbered model.pml1.trail, model.pml2.trail, ...; find one whose story matches.
    for t in $(ls "$model"*.trail 2>/dev/null | sed -nE "s/^$model([0-9]+)\.trail$/\1/p" | sort -n); do
      if narrative "$defs" "$t" | tr '\n' ' ' | grep -qE "$pattern"; then trail_n=$t; break; fi
    done
    if [ -n "$trail_n" ]; then
      cp "$model$trail_n.trail" "$model.trail"
      got=$(broken_invariant "$defs")
    fi
  elif [ -f "$model.trail" ]; then
    got=$(broken_invariant "$defs")
  fi

  if [ "$got" = "$expect" ]; then
    printf '%-12s %-27s %-10s %12s %13s  %s\n' "$model" "$switch" caught "$states" "$transitions" "$got"
    narrative "$defs" | grep -vE 'text of failed' | sed 's/^      /        | /'
  else
    printf '%-12s %-27s %-10s %12s %13s  %s\n' "$model" "$switch" MISSED "$states" "$transitions" "${got:-none}"
    if [ -z "$got" ] && [ -n "$pattern" ] && [ "${errors:-0}" != "0" ]; then
      echo "    no counterexample matched: $pattern"
    fi
    echo "    expected a counterexample breaking $expect; pan said:"
    grep -E 'pan:|errors' pan.out | head -n 5 | sed 's/^/      /'
    if [ -f "$model.trail" ]; then
      echo "    counterexample found instead:"; narrative "$defs"
      echo "    last steps (spin -t -p):"; steps "$defs" | sed 's/^/      /'
    fi
    failures=$((failures + 1))
  fi
done

if [ "$failures" -ne 0 ]; then
  echo "model: $failures check(s) went the wrong way (trails in $out)"
  exit 1
fi
echo "model: every honest model passes; every bug switch yields its counterexample"
