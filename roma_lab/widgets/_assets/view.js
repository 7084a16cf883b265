// Behaviour of an HTMLView (roma_lab/widgets/_view.py). Python renders all the HTML, which is also
// the static view of saved and exported notebooks: there each row is the <summary> of a
// <details class="rv-row"> holding its [data-detail] block, and opens by itself. This script adds
// what needs a browser and a kernel:
//   - a click on a row with data-select="<id>" (or on the <summary> around it: Enter on the focused
//     row) sets the synced selected_id instead of opening or closing that row;
//   - the row holding data-detail="<id>" is open only while <id> is selected (in every pane);
//   - <select data-filter="<attr>"> hides the rows whose data-<attr> (space-separated words) does
//     not contain the chosen value ("" shows all);
//   - <details data-key> keep their open/closed state when Python sends new HTML;
//   - <span class="rt-tick" data-tick-from="<s>"> counts on in seconds from its value while the view
//     is live, so a call in flight shows how long it has waited even between trace events;
//   - the widget's own element is marked rv-host, so a view drawn from a saved notebook's widget state
//     says it is not connected to the kernel instead of ipywidgets' bare red icon (_view.BASE_CSS).
// Filters and open details are view state: they stay in the browser.

function render({ model, el }) {
  el.classList.add("rv-host");
  const filters = {};
  const opened = {};
  let drawnAt = performance.now();
  const ticker = setInterval(() => {
    const elapsed = (performance.now() - drawnAt) / 1000;
    for (const tick of el.querySelectorAll(".rt-tick[data-tick-from]")) {
      tick.textContent = Math.round(parseFloat(tick.dataset.tickFrom) + elapsed).toString();
    }
  }, 1000);

  function showSelected() {
    const id = model.get("selected_id");
    for (const row of el.querySelectorAll("[data-select]")) {
      row.classList.toggle("rv-selected", row.dataset.select === id);
    }
    for (const detail of el.querySelectorAll("[data-detail]")) {
      detail.closest("details.rv-row").open = detail.dataset.detail === id;
    }
  }

  function applyFilters() {
    for (const row of el.querySelectorAll("[data-select]")) {
      const hidden = Object.entries(filters).some(
        ([attr, value]) => value !== "" && !(row.dataset[attr] || "").split(" ").includes(value));
      row.closest("details.rv-row").classList.toggle("rv-hidden", hidden);
    }
  }

  function draw() {
    for (const d of el.querySelectorAll("details[data-key]")) opened[d.dataset.key] = d.open;
    el.innerHTML = model.get("_html");
    drawnAt = performance.now();
    for (const view of el.querySelectorAll(".roma-view")) view.classList.add("rv-live");
    for (const d of el.querySelectorAll("details[data-key]")) {
      if (d.dataset.key in opened) d.open = opened[d.dataset.key];
    }
    for (const select of el.querySelectorAll("select[data-filter]")) {
      const attr = select.dataset.filter;
      if (attr in filters && [...select.options].some((o) => o.value === filters[attr])) {
        select.value = filters[attr];
      }
      filters[attr] = select.value;
      select.addEventListener("change", () => {
        filters[attr] = select.value;
        applyFilters();
      });
    }
    applyFilters();
    showSelected();
  }

  function onClick(event) {
    const row = event.target.closest("[data-select]")
      ?? event.target.closest("summary")?.querySelector("[data-select]");
    if (!row || !el.contains(row)) return;
    event.preventDefault(); // the row's <details> would open or close itself; here the selection decides
    model.set("selected_id", row.dataset.select);
    model.save_changes();
  }

  el.addEventListener("click", onClick);
  model.on("change:_html", draw);
  model.on("change:selected_id", showSelected);
  draw();
  return () => {
    clearInterval(ticker);
    el.classList.remove("rv-host");
    el.removeEventListener("click", onClick);
    model.off("change:_html", draw);
    model.off("change:selected_id", showSelected);
  };
}

export default { render };
