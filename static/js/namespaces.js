// The namespace request form: dependent fields (GPU model -> whole GPUs or its MIG profiles -> what
// is left on the cluster; environment -> storage classes; pod security -> reason) and a live check:
// the form's fields go to the server's preview, which answers with problems by field, whether a
// person must approve, the manifests and the diff. The page works without this script.
document.addEventListener("DOMContentLoaded", () => {
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

  function showErrors(errors) {
    form.querySelectorAll(".field-error").forEach((slot) => { slot.textContent = ""; });
    form.querySelectorAll("[aria-invalid]").forEach((input) => input.removeAttribute("aria-invalid"));
    for (const [field, messages] of Object.entries(errors)) {
      const slot = form.querySelector(`.field-error[data-for="${CSS.escape(field)}"]`) || form.querySelector('.field-error[data-for="blueprints"]');
      if (slot) slot.textContent = messages.join(" ");
      const input = form.querySelector(`[name="${CSS.escape(field)}"]`);
      if (input) input.setAttribute("aria-invalid", "true");
    }
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
      return;
    }
    if (mine !== sequence) return; // a newer check is under way
    showErrors(answer.errors);
    const problems = Object.values(answer.errors).reduce((total, list) => total + list.length, 0);
    if (!answer.valid) {
      verdict.textContent = `${problems} problem${problems === 1 ? "" : "s"} to fix`;
      verdict.className = "small status status--fail";
      state.textContent = `${answer.name || "The namespace"}: fix the fields marked in red.`;
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
  }

  form.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(check, 400); });
  form.addEventListener("change", () => { clearTimeout(timer); timer = setTimeout(check, 150); });
  // Leaving a field for the submit button fires "change": that check would only be cut off by the
  // page going to the request, and the server checks everything on submit anyway.
  form.addEventListener("submit", () => clearTimeout(timer));
  check();
});
