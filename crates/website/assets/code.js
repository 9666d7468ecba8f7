// Code views: the highlight of a line range (#L2-L4) and shift-click to extend it.

function codeMarkLines() {
  for (const row of document.querySelectorAll("tr.hl")) row.classList.remove("hl");
  const match = /^#L(\d+)(?:-L(\d+))?$/.exec(window.location.hash);
  if (!match) return;
  const first = Number(match[1]);
  const last = Math.max(first, Number(match[2] || match[1]));
  let top = null;
  for (let n = first; n <= last && n - first < 100000; n++) {
    const row = document.getElementById("L" + n);
    if (!row) break;
    row.classList.add("hl");
    top = top || row;
  }
  if (top) top.scrollIntoView({ block: "center" });
}

// Shift-click on a line number extends the highlighted range from the line already chosen.
function codeRangeClicks() {
  for (const link of document.querySelectorAll("table.code td.num a")) {
    link.addEventListener("click", (event) => {
      const current = /^#L(\d+)/.exec(window.location.hash);
      if (!event.shiftKey || !current) return;
      event.preventDefault();
      const a = Number(current[1]);
      const b = Number(link.textContent);
      window.location.hash = "#L" + Math.min(a, b) + "-L" + Math.max(a, b);
    });
  }
}

document.addEventListener("DOMContentLoaded", () => {
  codeRangeClicks();
  codeMarkLines();
  window.addEventListener("hashchange", codeMarkLines);
});
