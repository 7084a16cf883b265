// Behaviour of an HTMLView (roma_lab/widgets/_view.py). Python renders all the HTML, which is also
// the static view of saved and exported notebooks; this script only adds what needs a browser:
//   - a click on an element with data-select="<id>" sets the synced selected_id;
//   - elements with data-detail="<id>" are shown only while <id> is selected;
//   - <select data-filter="<attr>"> hides [data-select] rows whose data-<attr> (space-separated
//     words) does not contain the chosen value ("" shows all);
//   - <details data-key> keep their open/closed state when Python sends new HTML.
// Filters and open details are view state: they stay in the browser.

function render({ model, el }) {
  const filters = {};
  const opened = {};

  function showSelected() {
    const id = model.get("selected_id");
    for (const row of el.querySelectorAll("[data-select]")) {
      row.classList.toggle("rv-selected", row.dataset.select === id);
    }
    for (const pane of el.querySelectorAll("[data-detail]")) {
      pane.classList.toggle("rv-shown", pane.dataset.detail === id);
    }
  }

  function applyFilters() {
    for (const row of el.querySelectorAll("[data-select]")) {
      const hidden = Object.entries(filters).some(
        ([attr, value]) => value !== "" && !(row.dataset[attr] || "").split(" ").includes(value));
      row.classList.toggle("rv-hidden", hidden);
    }
  }

  function draw() {
    for (const d of el.querySelectorAll("details[data-key]")) opened[d.dataset.key] = d.open;
    el.innerHTML = model.get("_html");
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
    const row = event.target.closest("[data-select]");
    if (!row || !el.contains(row)) return;
    event.preventDefault(); // rows link to their detail for the static view; here we select instead
    model.set("selected_id", row.dataset.select);
    model.save_changes();
  }

  el.addEventListener("click", onClick);
  model.on("change:_html", draw);
  model.on("change:selected_id", showSelected);
  draw();
  return () => {
    el.removeEventListener("click", onClick);
    model.off("change:_html", draw);
    model.off("change:selected_id", showSelected);
  };
}

export default { render };
