// A product's page: copy the sample query, or run it against the API and show the first part of the answer.
document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("[data-copy]").forEach((button) => {
    button.addEventListener("click", async () => {
      const text = document.getElementById(button.dataset.copy).textContent;
      try {
        await navigator.clipboard.writeText(text);
        button.textContent = "Copied";
      } catch (error) {
        button.textContent = "Select and copy it by hand";
      }
    });
  });
  document.querySelectorAll("[data-run]").forEach((button) => {
    button.addEventListener("click", async () => {
      const target = document.getElementById(button.dataset.target);
      target.hidden = false;
      target.textContent = "Running…";
      try {
        const response = await fetch(button.dataset.run, { headers: { Accept: "application/json" } });
        const body = await response.text();
        let shown = body;
        try { shown = JSON.stringify(JSON.parse(body), null, 2); } catch (error) { /* not JSON: show as it is */ }
        target.textContent = `HTTP ${response.status}\n${shown.length > 4000 ? `${shown.slice(0, 4000)}\n… (${shown.length.toLocaleString()} characters)` : shown}`;
        target.dataset.status = String(response.status);
      } catch (error) {
        target.textContent = `The request failed: ${error}`;
      }
    });
  });
});
