// On a phone each table row is shown as a card (docs/stylesheets/extra.css): give every cell
// its column's name, shown before it. Runs on each page Material shows.
function labelTableCells() {
  for (const table of document.querySelectorAll(".md-typeset table:not([class])")) {
    const names = [...table.querySelectorAll("thead th")].map((th) => th.textContent.trim());
    for (const row of table.querySelectorAll("tbody tr")) {
      [...row.children].forEach((cell, index) => {
        if (names[index]) cell.dataset.label = names[index];
      });
    }
  }
}

if (typeof document$ !== "undefined") {
  document$.subscribe(labelTableCells);
} else {
  document.addEventListener("DOMContentLoaded", labelTableCells);
}
