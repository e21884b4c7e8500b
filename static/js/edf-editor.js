// The EDF editor: CodeMirror with TOML highlighting, live validation against the portal's validator
// (markers in the text, a findings list that jumps to the line), completion from the EDF JSON
// Schema, the resolved environment, copy buttons; and the side-by-side diff on the history page.
// The form's textarea stays the source of truth for saving, so the page works without JavaScript.
(function () {
  "use strict";

  const CM = window.BelvedereCM;
  const VALIDATE_DELAY_MS = 250;
  const SYNTAX_RULES = new Set(["toml-syntax", "toml-table-twice", "toml-key-twice"]);
  const RECOVERED_TITLE = "The text is not valid TOML; this was found by reading past the syntax error "
    + "(a missing quote or bracket added, or the bad lines left out). Fix the syntax error to be sure.";

  function csrfToken() {
    const input = document.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  function clampLine(doc, line) {
    return doc.line(Math.min(Math.max(line || 1, 1), doc.lines));
  }

  function offsetOf(doc, line, column) {
    const target = clampLine(doc, line);
    return Math.min(target.from + Math.max((column || 1) - 1, 0), target.to);
  }

  function parseEnv(text) {
    const env = {};
    text.split("\n").forEach((raw) => {
      const line = raw.trim();
      if (!line || line.startsWith("#")) return;
      const cut = line.indexOf("=");
      if (cut > 0) env[line.slice(0, cut).trim()] = line.slice(cut + 1);
    });
    return env;
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    Object.entries(attrs || {}).forEach(([key, value]) => {
      if (key === "class") node.className = value;
      else if (key.startsWith("data-")) node.setAttribute(key, value);
      else node[key] = value;
    });
    children.flat().forEach((child) => {
      if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
    });
    return node;
  }

  // ---------------------------------------------------------------- completion from the schema

  function schemaVocabulary(schema) {
    const top = [];
    const annotations = [];
    Object.entries(schema.properties || {}).forEach(([key, prop]) => {
      top.push({ key, prop });
    });
    function walk(prefix, node) {
      Object.entries(node.properties || {}).forEach(([key, child]) => {
        const path = prefix ? `${prefix}.${key}` : key;
        if (child.type === "object") walk(path, child);
        else annotations.push({ key: path, prop: child });
      });
    }
    walk("", (schema.properties || {}).annotations || {});
    return { top, annotations };
  }

  const COMMON_ENV = ["NCCL_DEBUG", "NCCL_NET", "CUDA_DEVICE_MAX_CONNECTIONS", "ENROOT_SLURM_HOOK", "ENROOT_LOGIN_SHELL",
    "PYTHONUNBUFFERED", "HF_HOME", "TRITON_CACHE_DIR", "XLA_PYTHON_CLIENT_MEM_FRACTION", "NVIDIA_VISIBLE_DEVICES"];

  function currentTable(state, lineNumber) {
    for (let n = lineNumber - 1; n >= 1; n -= 1) {
      const match = state.doc.line(n).text.trim().match(/^\[([^[\]]+)\]/);
      if (match) return match[1].trim();
    }
    return "";
  }

  function completionSource(getVocabulary) {
    return (context) => {
      const vocabulary = getVocabulary();
      if (!vocabulary) return null;
      const line = context.state.doc.lineAt(context.pos);
      const before = line.text.slice(0, context.pos - line.from);
      if (before.includes("#")) return null;
      const table = currentTable(context.state, line.number);
      if (/^\s*\[[^\]]*$/.test(before)) {
        const word = context.matchBefore(/[A-Za-z0-9_.-]*/);
        const hooks = new Set(vocabulary.annotations.map((a) => `annotations.${a.key.split(".").slice(0, -1).join(".")}`));
        return { from: word.from, options: ["env", "annotations", ...hooks].map((label) => ({ label, type: "namespace" })) };
      }
      const equals = before.indexOf("=");
      if (equals < 0) {
        const word = context.matchBefore(/[A-Za-z0-9_.-]*/);
        if (!word || (word.from === word.to && !context.explicit)) return null;
        if (table === "") {
          return {
            from: word.from,
            options: vocabulary.top.map(({ key, prop }) => ({
              label: key, type: "property", info: prop.description,
              apply: key === "env" || key === "annotations" ? `[${key}]\n` : `${key} = `,
            })),
          };
        }
        if (table === "annotations" || table.startsWith("annotations.")) {
          const prefix = table === "annotations" ? "" : table.slice("annotations.".length) + ".";
          return {
            from: word.from,
            options: vocabulary.annotations.filter((a) => a.key.startsWith(prefix)).map(({ key, prop }) => ({
              label: key.slice(prefix.length), type: "property", info: prop.description,
              apply: `${key.slice(prefix.length)} = "`,
            })),
          };
        }
        if (table === "env") {
          return { from: word.from, options: COMMON_ENV.map((label) => ({ label, type: "variable", apply: `${label} = "` })) };
        }
        return null;
      }
      const key = before.slice(0, equals).trim().replace(/"/g, "");
      const fullKey = table ? `${table}.${key}` : key;
      const word = context.matchBefore(/"?[A-Za-z0-9_.-]*/);
      if (fullKey.startsWith("annotations.")) {
        const entry = vocabulary.annotations.find((a) => `annotations.${a.key}` === fullKey);
        if (entry && entry.prop.enum) {
          return { from: word.from, options: entry.prop.enum.map((value) => ({ label: `"${value}"`, type: "enum" })) };
        }
      }
      const prop = vocabulary.top.find((t) => t.key === fullKey);
      if (prop && prop.prop.type === "boolean") {
        return { from: word.from, options: ["true", "false"].map((label) => ({ label, type: "keyword" })) };
      }
      return null;
    };
  }

  // ---------------------------------------------------------------- panels

  function renderFindings(view, findings) {
    const list = document.getElementById("edf-findings");
    const none = document.getElementById("edf-no-findings");
    list.replaceChildren();
    const rank = { error: 0, warning: 1, info: 2 };
    // Errors first; within a severity, what was found first-hand before what was found on the text
    // read past a TOML syntax error ("recovered"), then by position.
    const ordered = findings.slice().sort((a, b) => rank[a.severity] - rank[b.severity]
      || Number(Boolean(a.recovered)) - Number(Boolean(b.recovered)) || a.line - b.line || a.column - b.column);
    const recovered = findings.filter((f) => f.recovered).length;
    const syntax = findings.filter((f) => SYNTAX_RULES.has(f.rule));
    ordered.forEach((finding) => {
      const jump = el("button", { type: "button", class: "finding__where", "data-line": finding.line },
        `line ${finding.line}:${finding.column}`);
      jump.addEventListener("click", () => {
        const offset = offsetOf(view.state.doc, finding.line, finding.column);
        view.dispatch({ selection: { anchor: offset }, scrollIntoView: true });
        view.focus();
      });
      list.append(el("li", {
        class: `finding finding--${finding.severity}${finding.recovered ? " finding--recovered" : ""}`,
        "data-line": finding.line, "data-rule": finding.rule, "data-recovered": String(Boolean(finding.recovered)),
      },
        el("span", { class: `badge badge--${finding.severity}` }, finding.severity), " ", jump, " ",
        el("span", { class: "finding__message" }, finding.message),
        finding.recovered ? el("span", { class: "finding__recovered small muted", title: RECOVERED_TITLE },
          " (found on the text read past the syntax error)") : null,
        finding.path ? el("code", { class: "finding__path" }, finding.path) : null,
        finding.hint ? el("p", { class: "finding__hint small" }, finding.hint) : null));
    });
    none.hidden = findings.length > 0;
    const counts = { error: 0, warning: 0, info: 0 };
    findings.forEach((f) => { counts[f.severity] += 1; });
    // The badge counts every finding listed, whatever its severity.
    const badge = document.getElementById("edf-count");
    badge.textContent = String(findings.length);
    badge.title = `${counts.error} error${counts.error === 1 ? "" : "s"}, ${counts.warning} warning${counts.warning === 1 ? "" : "s"}, ${counts.info} info`;
    const status = document.getElementById("edf-status");
    if (syntax.length) {
      const lines = Array.from(new Set(syntax.map((f) => f.line))).sort((a, b) => a - b);
      status.textContent = `TOML syntax error${syntax.length > 1 ? "s" : ""} on line${lines.length > 1 ? "s" : ""} ${lines.join(", ")}: srun would fail`
        + (recovered ? ` (${recovered} more finding${recovered > 1 ? "s" : ""} from the rest of the text)` : "");
      status.className = "edf-status status status--fail";
    } else if (counts.error) {
      status.textContent = `${counts.error} error${counts.error > 1 ? "s" : ""}, ${counts.warning} warning${counts.warning === 1 ? "" : "s"}: srun would fail`;
      status.className = "edf-status status status--fail";
    } else if (counts.warning) {
      status.textContent = `valid, ${counts.warning} warning${counts.warning > 1 ? "s" : ""}`;
      status.className = "edf-status status status--warn";
    } else {
      status.textContent = "valid";
      status.className = "edf-status status status--ok";
    }
  }

  function renderResolved(resolved) {
    const box = document.getElementById("edf-resolved");
    box.replaceChildren();
    if (!resolved) {
      box.append(el("p", { class: "empty" }, "Fix the TOML syntax error first: srun reads nothing from a file that is not TOML."));
      return;
    }
    const expanded = resolved.expanded || {};
    const origin = resolved.origin || {};
    const from = (key) => (origin[key] && resolved.chain.length > 1 ? el("span", { class: "small muted" }, ` from ${origin[key]}`) : null);
    const show = (raw, done) => (done !== undefined && done !== raw ? [el("code", {}, done), el("span", { class: "small muted" }, ` (${raw})`)] : [el("code", {}, raw)]);
    box.append(el("p", { class: "small" }, "Chain: ", resolved.chain.join(" → ")));
    const rows = [];
    ["image", "workdir", "entrypoint", "writable"].forEach((key) => {
      const value = resolved[key];
      const text = value === null || value === "" ? "—" : String(value);
      rows.push(el("tr", {}, el("th", { scope: "row" }, key),
        el("td", {}, ...show(text, expanded[key] !== undefined && expanded[key] !== null ? String(expanded[key]) : undefined),
          resolved.defaults.includes(key) ? el("span", { class: "small muted" }, " (default)") : from(key))));
    });
    const list = (items, key) => el("ul", { class: "plain" }, items.map((item, index) => el("li", {},
      ...show(item, (expanded[key] || [])[index]), from(`${key}[${index}]`))));
    rows.push(el("tr", {}, el("th", { scope: "row" }, "mounts"), el("td", {}, resolved.mounts.length ? list(resolved.mounts, "mounts") : "—")));
    const table = (object, key) => el("ul", { class: "plain" }, Object.entries(object).map(([name, value]) => el("li", {},
      el("code", {}, name), " = ", ...show(value, (expanded[key] || {})[name]), from(`${key}.${name}`))));
    rows.push(el("tr", {}, el("th", { scope: "row" }, "env"), el("td", {}, Object.keys(resolved.env).length ? table(resolved.env, "env") : "—")));
    rows.push(el("tr", {}, el("th", { scope: "row" }, "annotations"),
      el("td", {}, Object.keys(resolved.annotations).length ? table(resolved.annotations, "annotations") : "—")));
    box.append(el("table", { class: "table edf-resolved-table" }, el("tbody", {}, rows)));
    if (resolved.missing_variables && resolved.missing_variables.length) {
      box.append(el("p", { class: "message message--error" }, `Not set: ${resolved.missing_variables.join(", ")}. srun would stop with an error.`));
    }
  }

  function setUpTabs() {
    const tabs = Array.from(document.querySelectorAll("[role=tab]"));
    tabs.forEach((tab) => tab.addEventListener("click", () => {
      tabs.forEach((other) => {
        const selected = other === tab;
        other.setAttribute("aria-selected", String(selected));
        other.tabIndex = selected ? 0 : -1;
        document.getElementById(other.getAttribute("aria-controls")).hidden = !selected;
      });
    }));
  }

  function setUpCopyButtons() {
    document.querySelectorAll("button.copy").forEach((button) => button.addEventListener("click", async () => {
      const text = document.getElementById(button.dataset.copy).textContent;
      try {
        await navigator.clipboard.writeText(text);
        button.textContent = "Copied";
      } catch (error) {
        const range = document.createRange();
        range.selectNodeContents(document.getElementById(button.dataset.copy));
        window.getSelection().removeAllRanges();
        window.getSelection().addRange(range);
        button.textContent = "Selected: press Ctrl+C";
      }
      setTimeout(() => { button.textContent = "Copy"; }, 2000);
    }));
    document.querySelectorAll("[data-confirm]").forEach((button) => button.addEventListener("click", (event) => {
      if (!window.confirm(button.dataset.confirm)) event.preventDefault();
    }));
  }

  // ---------------------------------------------------------------- the editor

  function initEditor() {
    const root = document.getElementById("edf-editor");
    const configNode = document.getElementById("edf-config");
    if (!root || !configNode) return;
    setUpTabs();
    setUpCopyButtons();
    const status = document.getElementById("edf-status");
    if (!CM) {
      status.textContent = "The editor could not load; edit the text below and save.";
      return;
    }
    const config = JSON.parse(configNode.textContent);
    const textarea = document.getElementById("id_text");
    textarea.closest(".edf-text-fallback").hidden = true;
    const envArea = document.getElementById("edf-env");
    envArea.value = Object.entries(config.env || {}).map(([key, value]) => `${key}=${value}`).join("\n");

    let vocabulary = null;
    fetch(config.schemaUrl, { credentials: "same-origin" }).then((r) => r.json())
      .then((schema) => { vocabulary = schemaVocabulary(schema); })
      .catch(() => { /* completion is a convenience; validation still works */ });

    let sequence = 0;
    async function validate(view) {
      const mine = ++sequence;
      const body = { text: view.state.doc.toString(), use_saved: true, owner: config.owner, env: parseEnv(envArea.value) };
      if (config.name) body.name = config.name;
      let response;
      let data;
      try {
        response = await fetch(config.validateUrl, {
          method: "POST", credentials: "same-origin",
          headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrfToken() },
          body: JSON.stringify(body),
        });
        data = await response.json();
      } catch (error) {
        status.textContent = `Could not check: ${error.message}`;
        status.className = "edf-status status status--fail";
        return [];
      }
      if (mine !== sequence) return [];
      if (!response.ok) {
        status.textContent = `Could not check: ${data.detail || response.status}`;
        status.className = "edf-status status status--fail";
        return [];
      }
      renderFindings(view, data.findings);
      renderResolved(data.resolved);
      root.dataset.checked = String(mine);
      const doc = view.state.doc;
      return data.findings.map((finding) => {
        const from = offsetOf(doc, finding.line, finding.column);
        const lineEnd = clampLine(doc, finding.line).to;
        const text = finding.hint ? `${finding.message}\n${finding.hint}` : finding.message;
        return {
          from, to: Math.max(lineEnd, from), severity: finding.severity, source: finding.rule,
          message: finding.recovered ? `${text}\n(found on the text read past the syntax error)` : text,
        };
      });
    }

    const view = new CM.EditorView({
      parent: root,
      state: CM.EditorState.create({
        doc: textarea.value,
        extensions: [
          CM.basicSetup,
          CM.keymap.of([CM.indentWithTab]),
          CM.toml,
          CM.lintGutter(),
          CM.linter(validate, { delay: VALIDATE_DELAY_MS }),
          CM.autocompletion({ override: [completionSource(() => vocabulary)] }),
          CM.EditorState.readOnly.of(false),
          CM.EditorView.updateListener.of((update) => {
            if (update.docChanged) textarea.value = update.state.doc.toString();
          }),
        ],
      }),
    });
    root.editorView = view;
    let envTimer = null;
    envArea.addEventListener("input", () => {
      clearTimeout(envTimer);
      envTimer = setTimeout(() => CM.forceLinting(view), VALIDATE_DELAY_MS);
    });
    document.getElementById("edf-form").addEventListener("submit", () => {
      textarea.value = view.state.doc.toString();
    });
    const templateSelect = document.getElementById("edf-template");
    if (templateSelect) {
      const original = textarea.value;
      templateSelect.addEventListener("change", () => {
        if (view.state.doc.toString() !== original && !window.confirm("Replace your text with the template?")) return;
        window.location.href = `${templateSelect.dataset.newUrl}?template=${encodeURIComponent(templateSelect.value)}`;
      });
    }
  }

  function initDiff() {
    const root = document.getElementById("edf-diff");
    const textsNode = document.getElementById("edf-diff-texts");
    if (!root || !textsNode || !CM || !CM.MergeView) return;
    const texts = JSON.parse(textsNode.textContent);
    const side = (doc) => ({ doc, extensions: [CM.basicSetup, CM.toml, CM.EditorView.editable.of(false), CM.EditorState.readOnly.of(true)] });
    root.mergeView = new CM.MergeView({ a: side(texts.from), b: side(texts.to), parent: root, collapseUnchanged: { margin: 3 } });
  }

  document.addEventListener("DOMContentLoaded", () => {
    initEditor();
    initDiff();
  });
}());
