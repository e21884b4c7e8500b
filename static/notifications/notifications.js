// The notifications page: a manager's switch saves at once through the API (PATCH), and the verdict at the top
// follows. Without this script the switches post the form (the Save button).
document.addEventListener("DOMContentLoaded", () => {
  const forms = Array.from(document.querySelectorAll("form.notify-form"));
  const verdict = document.getElementById("verdict-line");

  function projectState(row) {
    const form = row.querySelector("form.notify-form");
    if (form) return { waste: form.elements.waste.checked, straggler: form.elements.straggler.checked };
    const flags = row.querySelectorAll(".notify-flag");
    return { waste: flags[0]?.classList.contains("notify-flag--on"), straggler: flags[1]?.classList.contains("notify-flag--on") };
  }

  function updateVerdict() {
    if (!verdict) return;
    const rows = Array.from(document.querySelectorAll("#notify-projects tbody tr"));
    const on = rows.map((row) => [row.dataset.account, projectState(row)]).filter(([, s]) => s.waste || s.straggler);
    const total = rows.length;
    verdict.replaceChildren();
    const strong = document.createElement("strong");
    if (!on.length) {
      strong.textContent = `Mail is off for all your project${total === 1 ? "" : "s"}`;
      verdict.append(strong, ": nobody is told when a running job wastes its GPUs or a straggler slows it down.");
      return;
    }
    strong.textContent = `Mail is on for ${on.length} of your ${total} project${total === 1 ? "" : "s"}`;
    verdict.append(strong, ": ");
    on.forEach(([account, state], index) => {
      const code = document.createElement("code");
      code.textContent = account;
      const what = [state.waste && "wasteful jobs", state.straggler && "stragglers"].filter(Boolean).join(", ");
      verdict.append(code, ` (${what})${index < on.length - 1 ? ", " : "."}`);
    });
    const off = total - on.length;
    if (off) verdict.append(` ${off} other${off === 1 ? " gets" : "s get"} none.`);
  }

  forms.forEach((form) => {
    const state = form.querySelector(".notify-state");
    let saved = { waste: form.elements.waste.checked, straggler: form.elements.straggler.checked };
    form.querySelector(".notify-save").hidden = true;
    form.addEventListener("change", async () => {
      const body = { waste: form.elements.waste.checked, straggler: form.elements.straggler.checked };
      state.textContent = "saving…";
      try {
        const response = await fetch(form.dataset.api, {
          method: "PATCH",
          credentials: "same-origin",
          headers: { "Content-Type": "application/json", "X-CSRFToken": form.elements.csrfmiddlewaretoken.value },
          body: JSON.stringify(body),
        });
        const answer = await response.json().catch(() => ({}));
        if (!response.ok) throw new Error(answer.detail || `HTTP ${response.status}`);
        form.elements.waste.checked = answer.waste;
        form.elements.straggler.checked = answer.straggler;
        saved = { waste: answer.waste, straggler: answer.straggler };
        const changed = form.closest("tr").querySelector(".notify-changed");
        if (changed) changed.textContent = `${answer.changed_by} just now`;
        state.textContent = "saved";
        state.className = "small notify-state status--ok";
      } catch (error) {
        // Show what is really stored, not what was clicked.
        form.elements.waste.checked = saved.waste;
        form.elements.straggler.checked = saved.straggler;
        state.textContent = `not saved: ${error.message}`;
        state.className = "small notify-state status--fail";
      }
      updateVerdict();
    });
  });
});
