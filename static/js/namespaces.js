// The namespace request form: dependent fields (GPU model -> whole GPUs or its MIG profiles -> what
// is left on the cluster; environment -> storage classes; pod security -> reason) and a live check:
// the form's fields go to the server's preview, which answers with problems by field, whether a
// person must approve, the manifests and the diff. A field's problems show once it was touched (typed
// in, changed or left) or the form was submitted. Also: a request's page updates itself in place, the
// teardown button waits for the namespace's name, a production approval asks for its note.
// The pages work without this script.
document.addEventListener("DOMContentLoaded", () => {
  requestForm();
  liveRequest();
  teardownConfirm();
  decideForm();
});

function requestForm() {
  const form = document.getElementById("ns-form");
  if (!form) return;
  const inventory = JSON.parse(document.getElementById("ns-inventory").textContent);
  const models = Object.fromEntries(inventory.gpu_models.map((model) => [model.id, model]));
  const $ = (selector, root = form) => root.querySelector(selector);

  function profileLabel(profile) {
    return profile === "whole" ? "whole GPUs" : `MIG ${profile}`;
  }

  function updateGpuRow(row) {
    const model = models[$(".gpu-model", row).value];
    const profileSelect = $(".gpu-profile", row);
    const count = $(".gpu-count", row);
    const left = $(".gpu-left", row);
    const chosen = profileSelect.value;
    const profiles = model ? model.profiles : [{ profile: "whole", left: 0, capacity: 0 }];
    profileSelect.replaceChildren(...profiles.map((item) => {
      const option = document.createElement("option");
      option.value = item.profile;
      option.textContent = `${profileLabel(item.profile)} (${item.left} left)`;
      option.selected = item.profile === chosen;
      return option;
    }));
    profileSelect.disabled = !model;
    count.disabled = !model;
    const current = profiles.find((item) => item.profile === profileSelect.value);
    if (model && current) {
      count.max = String(current.left);
      left.textContent = `${current.left} of ${current.capacity} left on the cluster`;
    } else {
      count.removeAttribute("max");
      left.textContent = "";
    }
  }

  function updateEnvironment() {
    const environment = inventory.environments[$("#f-environment").value] || { storage: [] };
    form.querySelectorAll(".storage-class").forEach((block) => {
      const allowed = environment.storage.includes(block.dataset.class);
      block.querySelectorAll("input").forEach((input) => { input.disabled = !allowed; });
      $(".storage-note", block).textContent = allowed ? "" : `not offered in ${$("#f-environment").value}`;
    });
  }

  function updatePsa() {
    $("#psa-reason").hidden = $("#f-psa").value === "restricted";
  }

  function updatePrefix() {
    const team = $("#f-team");
    $("#name-prefix").textContent = `${team.value}-`;
  }

  form.querySelectorAll(".gpu-row").forEach((row) => {
    updateGpuRow(row);
    row.addEventListener("change", () => updateGpuRow(row));
  });
  form.querySelectorAll(".blueprint").forEach((block) => {
    const box = $('input[type="checkbox"]', block);
    const params = $(".blueprint-params", block);
    const toggle = () => { params.hidden = !box.checked; };
    box.addEventListener("change", toggle);
    toggle();
  });
  $("#f-environment").addEventListener("change", updateEnvironment);
  $("#f-psa").addEventListener("change", updatePsa);
  $("#f-team").addEventListener("change", updatePrefix);
  updateEnvironment();
  updatePsa();

  // Live check.
  const verdict = document.getElementById("ns-verdict");
  const state = document.getElementById("preview-state");
  let timer = null;
  let sequence = 0;

  // Fields the person has touched; every field counts once the form was submitted (or came back with errors).
  const touched = new Set();
  let submitted = document.getElementById("form-errors") !== null;
  let lastAnswer = null;
  let dirty = false; // edited since the last answer

  function shown(field) {
    if (submitted || touched.has(field)) return true;
    if (field === "blueprints") return [...touched].some((name) => name.startsWith("bp_"));
    // a problem of a whole service or of the GPU rows shows once one of its fields was touched
    const base = field.replace(/_(model|profile|count)_(\d+)$/, "_$2");
    return [...touched].some((name) => name.startsWith(`${field}_`) || name.replace(/_(model|profile|count)_(\d+)$/, "_$2") === base);
  }

  function showErrors(errors) {
    form.querySelectorAll(".field-error").forEach((slot) => { slot.textContent = ""; });
    form.querySelectorAll("[aria-invalid]").forEach((input) => input.removeAttribute("aria-invalid"));
    const hidden = [];
    for (const [field, messages] of Object.entries(errors)) {
      if (!shown(field)) {
        hidden.push(field);
        continue;
      }
      const slot = form.querySelector(`.field-error[data-for="${CSS.escape(field)}"]`) || form.querySelector('.field-error[data-for="blueprints"]');
      if (slot) slot.textContent = messages.join(" ");
      const input = form.querySelector(`[name="${CSS.escape(field)}"]`);
      if (input) input.setAttribute("aria-invalid", "true");
    }
    return hidden;
  }

  function label(field) {
    const input = form.querySelector(`[name="${CSS.escape(field)}"]`);
    const text = input && input.id ? form.querySelector(`label[for="${CSS.escape(input.id)}"]`) : null;
    return text ? text.textContent.replace(/\s*\*$/, "").trim() : field;
  }

  function showDiff(target, text) {
    target.replaceChildren(...text.split("\n").map((line) => {
      const span = document.createElement("span");
      const kind = line.startsWith("+++") || line.startsWith("---") ? "file" : line.startsWith("@@") ? "hunk"
        : line.startsWith("+") ? "add" : line.startsWith("-") ? "remove" : "context";
      span.className = `diff-${kind}`;
      span.textContent = `${line}\n`;
      return span;
    }));
  }

  async function check() {
    const mine = ++sequence;
    state.textContent = "Checking…";
    dirty = false; // these values are the ones checked; an edit from now on makes the answer stale
    const body = new FormData(form);
    form.querySelectorAll("select:disabled, input:disabled").forEach((input) => body.delete(input.name));
    if ($("#f-team").disabled) body.set("team", $("#f-team").value);
    let answer;
    try {
      const response = await fetch(form.dataset.previewUrl, {
        method: "POST", body, headers: { "X-CSRFToken": body.get("csrfmiddlewaretoken"), Accept: "application/json" },
      });
      answer = await response.json();
    } catch (error) {
      state.textContent = `The check could not reach the portal (${error}); submitting still checks everything.`;
      if (mine === sequence && !dirty) delete form.dataset.pending;
      return;
    }
    if (mine !== sequence) return; // a newer check is under way
    lastAnswer = answer;
    const hidden = showErrors(answer.errors);
    const problems = Object.entries(answer.errors).filter(([field]) => !hidden.includes(field))
      .reduce((total, [, list]) => total + list.length, 0);
    if (!answer.valid && problems) {
      verdict.textContent = `${problems} problem${problems === 1 ? "" : "s"} to fix`;
      verdict.className = "small status status--fail";
      state.textContent = `${answer.name || "The namespace"}: fix the fields marked in red.`;
    } else if (!answer.valid) {
      const todo = [...new Set(hidden.map(label))];
      verdict.textContent = `still to fill in: ${todo.slice(0, 4).join(", ")}${todo.length > 4 ? ` and ${todo.length - 4} more` : ""}`;
      verdict.className = "small muted";
      state.textContent = "Fill in the form: each field is checked once you have filled it in.";
    } else if (answer.needs_approval.length) {
      verdict.textContent = `needs approval by ${answer.approvers.join(", ") || "the platform team"}`;
      verdict.className = "small status status--warn";
      state.textContent = `${answer.name}: valid.`;
    } else {
      verdict.textContent = "inside your envelope: approved at once";
      verdict.className = "small status status--ok";
      state.textContent = `${answer.name}: valid.`;
    }
    const approval = document.getElementById("preview-approval");
    approval.replaceChildren(...answer.needs_approval.map((reason) => {
      const line = document.createElement("p");
      line.textContent = `Needs approval: ${reason}`;
      return line;
    }));
    showDiff(document.getElementById("preview-diff"), answer.diff || (answer.valid ? "(no change to the repository)" : ""));
    document.getElementById("preview-manifests").textContent = answer.manifests;
    form.dataset.checked = String(mine);
    if (!dirty) delete form.dataset.pending;
  }

  function touch(event) {
    if (event.target && event.target.name) touched.add(event.target.name);
  }
  // data-pending says an edit has not been checked yet (a check is waiting or under way).
  function edited(event, delay) {
    touch(event);
    dirty = true;
    form.dataset.pending = "true";
    clearTimeout(timer);
    timer = setTimeout(check, delay);
  }
  form.addEventListener("input", (event) => edited(event, 400));
  form.addEventListener("change", (event) => edited(event, 150));
  // Leaving a field shows its problems (a required field left empty included), without a new check.
  form.addEventListener("focusout", (event) => {
    if (!event.target.name || touched.has(event.target.name)) return;
    touched.add(event.target.name);
    if (lastAnswer && !dirty) showAnswer();
  });
  function showAnswer() {
    const answer = lastAnswer;
    const hidden = showErrors(answer.errors);
    const problems = Object.entries(answer.errors).filter(([field]) => !hidden.includes(field))
      .reduce((total, [, list]) => total + list.length, 0);
    if (problems) {
      verdict.textContent = `${problems} problem${problems === 1 ? "" : "s"} to fix`;
      verdict.className = "small status status--fail";
    }
  }
  // Submitting: when the last check (of exactly these values) found problems, show them all here
  // instead of a round trip; otherwise the server checks everything again.
  form.addEventListener("submit", (event) => {
    clearTimeout(timer);
    submitted = true;
    if (lastAnswer && !dirty && !lastAnswer.valid) {
      event.preventDefault();
      showAnswer();
      state.textContent = `${lastAnswer.name || "The namespace"}: not submitted, fix the fields marked in red.`;
      const first = form.querySelector('[aria-invalid="true"]');
      if (first) first.focus();
    }
  });

  // The services' host names are picked from the namespace's host names, typed once.
  const hostnames = $("#f-hostnames");
  function updateHostPicks() {
    const hosts = hostnames.value.split(/[\s,]+/).map((host) => host.trim()).filter(Boolean);
    form.querySelectorAll(".hostname-pick").forEach((select) => {
      const chosen = select.value || select.dataset.value || "";
      const first = document.createElement("option");
      first.value = "";
      first.textContent = hosts.length ? `${hosts[0]} (the first host name above)` : "add a host name under Security and network";
      select.replaceChildren(first, ...hosts.map((host) => {
        const option = document.createElement("option");
        option.value = host;
        option.textContent = host;
        option.selected = host === chosen;
        return option;
      }));
    });
  }
  hostnames.addEventListener("input", updateHostPicks);
  updateHostPicks();
  check();
}

// A request's page: the state, message, steps and diff come back from the server as they change.
function liveRequest() {
  const live = document.getElementById("req-live");
  if (!live) return;
  let last = live.innerHTML;
  async function poll() {
    const state = live.querySelector(".req-live-state");
    if (!state || state.dataset.final) return;
    try {
      const response = await fetch(live.dataset.liveUrl, { headers: { Accept: "text/html" }, credentials: "same-origin" });
      if (response.ok) {
        const html = await response.text();
        if (html !== last) {
          live.innerHTML = html;
          last = html;
        }
      }
    } catch (error) {
      // the portal is unreachable for a moment: ask again later
    }
    const now = live.querySelector(".req-live-state");
    if (now && !now.dataset.final) setTimeout(poll, now.dataset.status === "waiting_approval" ? 15000 : 2000);
  }
  setTimeout(poll, 2000);
}

// Teardown: the button waits until the namespace's name is typed (the server checks it too).
function teardownConfirm() {
  const input = document.getElementById("td-confirm");
  const button = document.getElementById("td-submit");
  if (!input || !button) return;
  const update = () => { button.disabled = input.value.trim() !== input.dataset.expected; };
  input.addEventListener("input", update);
  update();
}

// A production approval asks for a note and the confirmation before it is sent (the server refuses it without them).
function decideForm() {
  const form = document.getElementById("decide-form");
  if (!form || !form.dataset.production) return;
  const hint = document.getElementById("d-hint");
  form.addEventListener("submit", (event) => {
    if (!event.submitter || event.submitter.value !== "approve") return;
    const missing = [];
    if (!form.querySelector("#d-reason").value.trim()) missing.push("a note saying what you checked");
    if (!form.querySelector("#d-confirm").checked) missing.push("the confirmation");
    if (missing.length) {
      event.preventDefault();
      hint.textContent = `Approving a production namespace takes ${missing.join(" and ")}.`;
      hint.className = "small status status--fail";
    }
  });
}
