/* The activity page's charts (templates/admin/tools_app/activity/page.html): Chart.js from
   toolhub/vendor/chartjs, the data from the page's JSON script element #activity-data. */
(function () {
  "use strict";
  var COLORS = ["#417690", "#e07b39", "#5a9e4b", "#b5487c", "#8c6bb1", "#c9a227", "#3fa7a3", "#a0522d", "#888888"];

  function color(index, name) {
    return name === "other" ? "#aaaaaa" : COLORS[index % COLORS.length];
  }

  function timeChart(id, labels, series, field, kind) {
    var canvas = document.getElementById(id);
    if (!canvas) return null;
    var datasets = series.map(function (item, index) {
      return {
        label: item.name,
        data: item[field],
        backgroundColor: color(index, item.name),
        borderColor: color(index, item.name),
        borderWidth: kind === "line" ? 2 : 0,
        pointRadius: 0,
        spanGaps: false,
        stack: kind === "bar" ? "all" : undefined,
      };
    });
    return new Chart(canvas, {
      type: kind,
      data: { labels: labels, datasets: datasets },
      options: {
        animation: false,
        maintainAspectRatio: false,
        interaction: { mode: "index", intersect: false },
        scales: {
          x: { stacked: kind === "bar", ticks: { maxTicksLimit: 8, maxRotation: 0 } },
          y: { stacked: kind === "bar", beginAtZero: true, ticks: { precision: kind === "bar" ? 0 : undefined } },
        },
        plugins: { legend: { position: "bottom", labels: { boxWidth: 12 } } },
      },
    });
  }

  function barChart(id, labels, values, label, barColor) {
    var canvas = document.getElementById(id);
    if (!canvas) return null;
    return new Chart(canvas, {
      type: "bar",
      data: { labels: labels, datasets: [{ label: label, data: values, backgroundColor: barColor }] },
      options: {
        animation: false,
        maintainAspectRatio: false,
        indexAxis: "y",
        scales: { x: { beginAtZero: true, ticks: { precision: 0 } } },
        plugins: { legend: { display: false } },
      },
    });
  }

  function draw() {
    var element = document.getElementById("activity-data");
    if (!element || typeof Chart === "undefined") return;
    var data = JSON.parse(element.textContent);
    var labels = data.labels;
    var charts = {
      "chart-instance-calls": timeChart("chart-instance-calls", labels, data.by_instance, "calls", "bar"),
      "chart-tool-calls": timeChart("chart-tool-calls", labels, data.by_tool, "calls", "bar"),
      "chart-instance-errors": timeChart("chart-instance-errors", labels, data.by_instance, "errors", "bar"),
      "chart-tool-errors": timeChart("chart-tool-errors", labels, data.by_tool, "errors", "bar"),
      "chart-instance-p95": timeChart("chart-instance-p95", labels, data.by_instance, "p95_ms", "line"),
      "chart-tool-p95": timeChart("chart-tool-p95", labels, data.by_tool, "p95_ms", "line"),
      "chart-top-tools": barChart(
        "chart-top-tools",
        data.top_tools.map(function (row) { return row.name; }),
        data.top_tools.map(function (row) { return row.calls; }),
        "calls",
        COLORS[0]
      ),
      "chart-top-errors": barChart(
        "chart-top-errors",
        data.top_errors.map(function (row) { return row.code; }),
        data.top_errors.map(function (row) { return row.calls; }),
        "failed calls",
        "#ba2121"
      ),
      "chart-refusals": new Chart(document.getElementById("chart-refusals"), {
        type: "bar",
        data: {
          labels: labels,
          datasets: [
            { label: "over a budget", data: data.refusals.budget, backgroundColor: "#e07b39", stack: "all" },
            { label: "rate-limited", data: data.refusals.rate_limited, backgroundColor: "#8c6bb1", stack: "all" },
            { label: "requests over a rate limit", data: data.refusals.requests, backgroundColor: "#4b7bbd", stack: "all" },
          ],
        },
        options: {
          animation: false,
          maintainAspectRatio: false,
          scales: {
            x: { stacked: true, ticks: { maxTicksLimit: 12, maxRotation: 0 } },
            y: { stacked: true, beginAtZero: true, ticks: { precision: 0 } },
          },
          plugins: { legend: { position: "bottom", labels: { boxWidth: 12 } } },
        },
      }),
    };
    // For tests and scripts: the drawn charts by canvas id.
    window.toolhubActivityCharts = charts;
    document.body.setAttribute("data-charts-drawn", String(Object.keys(charts).length));
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
