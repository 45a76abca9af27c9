//! `weft bench plot FILE... --out DIR`: PNG charts from JSON results.
//!
//! Drawn with `plotters`' bitmap backend only, so no system library is
//! needed. Text needs a TrueType font, and plotters' default font path goes
//! through fontconfig; instead the `ab_glyph` backend is fed a TTF file read
//! at run time: `$WEFT_PLOT_FONT`, else DejaVu Sans at its usual Linux
//! paths. Without one the charts are still drawn, without any text (titles,
//! axis labels, legend), and [`plot`] says so in its returned notes.
//!
//! Charts:
//! - `throughput.png`: ops/sec per benchmark (groups) per input file (bars
//!   coloured by series: engine, memtable, threads);
//! - `latency-<benchmark>.png`: p50/p95/p99/p99.9 in µs (log scale) per
//!   series and operation kind, for benchmarks that recorded latencies.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::prelude::*;

use crate::json::{self, Report};
use crate::{Error, Result};

const FONT: &str = "sans-serif";
const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];

/// Registers a TTF with plotters once; `true` when text can be drawn.
fn fonts_available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        let candidates = std::env::var("WEFT_PLOT_FONT")
            .ok()
            .into_iter()
            .chain(FONT_PATHS.iter().map(|s| s.to_string()));
        for path in candidates {
            if let Ok(bytes) = std::fs::read(&path) {
                // plotters keeps fonts for the life of the process.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font(FONT, FontStyle::Normal, bytes).is_ok() {
                    return true;
                }
            }
        }
        false
    })
}

/// A chart series: one input file.
struct Series {
    label: String,
    report: Report,
}

fn label(r: &Report) -> String {
    let threads = r
        .config
        .get("threads")
        .and_then(|v| v.as_u64())
        .unwrap_or(1);
    match &r.memtable {
        Some(m) => format!("{} {} t{}", r.engine, m, threads),
        None => format!("{} t{}", r.engine, threads),
    }
}

fn plot_err(e: impl std::fmt::Display) -> Error {
    Error::Plot(e.to_string())
}

/// Reads every file, draws the charts into `out_dir`, and returns the files
/// written plus notes (e.g. "no font found: charts have no text").
pub fn plot(files: &[PathBuf], out_dir: &Path) -> Result<(Vec<PathBuf>, Vec<String>)> {
    let mut series = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f).map_err(|source| Error::Io {
            context: format!("reading {}", f.display()),
            source,
        })?;
        let report =
            json::parse(&text).map_err(|e| Error::Plot(format!("{}: {e}", f.display())))?;
        series.push(Series {
            label: label(&report),
            report,
        });
    }
    if series.is_empty() {
        return Err(Error::Plot("no input files".into()));
    }
    std::fs::create_dir_all(out_dir).map_err(|source| Error::Io {
        context: format!("creating {}", out_dir.display()),
        source,
    })?;
    let text = fonts_available();
    let mut notes = Vec::new();
    if !text {
        notes.push(
            "no TrueType font found (set WEFT_PLOT_FONT=/path/to/font.ttf): \
             charts are drawn without text"
                .to_string(),
        );
    }
    let mut written = Vec::new();
    let path = out_dir.join("throughput.png");
    throughput_chart(&series, &path, text)?;
    written.push(path);

    let mut benches: Vec<String> = Vec::new();
    for s in &series {
        for b in &s.report.benchmarks {
            if !b.latency_us.is_empty() && !benches.contains(&b.name) {
                benches.push(b.name.clone());
            }
        }
    }
    for b in benches {
        let path = out_dir.join(format!("latency-{b}.png"));
        latency_chart(&series, &b, &path, text)?;
        written.push(path);
    }
    Ok((written, notes))
}

fn benchmark_names(series: &[Series]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for s in series {
        for b in &s.report.benchmarks {
            if !b.skipped && !names.contains(&b.name) {
                names.push(b.name.clone());
            }
        }
    }
    names
}

fn throughput_chart(series: &[Series], path: &Path, text: bool) -> Result<()> {
    let names = benchmark_names(series);
    let max = series
        .iter()
        .flat_map(|s| s.report.benchmarks.iter().map(|b| b.ops_per_sec))
        .fold(1.0f64, f64::max);
    let width = (160 + names.len() * (40 + 22 * series.len())).clamp(640, 2400) as u32;
    let root = BitMapBackend::new(path, (width, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let mut b = ChartBuilder::on(&root);
    b.margin(10);
    if text {
        b.caption("Throughput (ops/sec, higher is better)", (FONT, 20))
            .x_label_area_size(60)
            .y_label_area_size(80);
    }
    let n = names.len().max(1);
    let mut chart = b
        .build_cartesian_2d(0f64..n as f64, 0f64..max * 1.15)
        .map_err(plot_err)?;
    let mut mesh = chart.configure_mesh();
    mesh.disable_x_mesh();
    if text {
        let names2 = names.clone();
        mesh.x_labels(n * 2 + 1)
            .x_label_formatter(&move |x| {
                let i = x.floor() as usize;
                if (x - i as f64 - 0.5).abs() < 0.01 {
                    names2.get(i).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|y| format!("{:.0}k", y / 1000.0))
            .label_style((FONT, 13))
            .draw()
            .map_err(plot_err)?;
    } else {
        mesh.x_labels(0).y_labels(0).draw().map_err(plot_err)?;
    }
    let k = series.len() as f64;
    let bar = 0.8 / k;
    for (si, s) in series.iter().enumerate() {
        let color = Palette99::pick(si).to_rgba();
        let bars: Vec<Rectangle<(f64, f64)>> = names
            .iter()
            .enumerate()
            .filter_map(|(i, name)| {
                let e = s.report.benchmarks.iter().find(|b| &b.name == name)?;
                let x0 = i as f64 + 0.1 + si as f64 * bar;
                Some(Rectangle::new(
                    [(x0, 0.0), (x0 + bar * 0.9, e.ops_per_sec)],
                    color.filled(),
                ))
            })
            .collect();
        let drawn = chart.draw_series(bars).map_err(plot_err)?;
        if text {
            drawn.label(s.label.clone()).legend(move |(x, y)| {
                Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled())
            });
        }
    }
    if text {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font((FONT, 13))
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(plot_err)?;
    }
    root.present().map_err(plot_err)?;
    Ok(())
}

fn latency_chart(series: &[Series], bench: &str, path: &Path, text: bool) -> Result<()> {
    // (label, [p50, p95, p99, p99.9]) per series and operation kind.
    let mut lines: Vec<(String, [f64; 4])> = Vec::new();
    for s in series {
        if let Some(b) = s.report.benchmarks.iter().find(|b| b.name == bench) {
            for (kind, l) in &b.latency_us {
                lines.push((
                    format!("{} {}", s.label, kind),
                    [l.p50, l.p95, l.p99, l.p999],
                ));
            }
        }
    }
    let max = lines
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .fold(1.0f64, f64::max);
    let min = lines
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .filter(|v| *v > 0.0)
        .fold(max, f64::min)
        .max(0.01);
    let root = BitMapBackend::new(path, (640, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let mut b = ChartBuilder::on(&root);
    b.margin(10);
    if text {
        b.caption(
            format!("{bench}: latency percentiles (µs, log)"),
            (FONT, 18),
        )
        .x_label_area_size(40)
        .y_label_area_size(70);
    }
    let mut chart = b
        .build_cartesian_2d(-0.3f64..3.3f64, (min * 0.8..max * 1.5).log_scale())
        .map_err(plot_err)?;
    let mut mesh = chart.configure_mesh();
    if text {
        mesh.x_labels(4)
            .x_label_formatter(&|x| {
                let names = ["p50", "p95", "p99", "p99.9"];
                let i = x.round();
                if (x - i).abs() < 0.05 && (0.0..4.0).contains(&i) {
                    names[i as usize].to_string()
                } else {
                    String::new()
                }
            })
            .label_style((FONT, 13))
            .draw()
            .map_err(plot_err)?;
    } else {
        mesh.x_labels(0).y_labels(0).draw().map_err(plot_err)?;
    }
    for (i, (label, v)) in lines.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let pts: Vec<(f64, f64)> = v
            .iter()
            .enumerate()
            .map(|(x, y)| (x as f64, y.max(min)))
            .collect();
        chart
            .draw_series(pts.iter().map(|p| Circle::new(*p, 3, color.filled())))
            .map_err(plot_err)?;
        let drawn = chart
            .draw_series(LineSeries::new(pts, color.stroke_width(2)))
            .map_err(plot_err)?;
        if text {
            drawn.label(label.clone()).legend(move |(x, y)| {
                PathElement::new([(x, y), (x + 15, y)], color.stroke_width(2))
            });
        }
    }
    if text {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font((FONT, 12))
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(plot_err)?;
    }
    root.present().map_err(plot_err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_pngs_from_reports() {
        let dir = tempfile::tempdir().unwrap();
        let mut files = Vec::new();
        for (i, engine) in ["weft", "fjall"].iter().enumerate() {
            let mut r = crate::json::tests::sample();
            r.engine = engine.to_string();
            r.benchmarks[0].ops_per_sec = 1000.0 * (i + 1) as f64;
            let p = dir.path().join(format!("{engine}.json"));
            std::fs::write(&p, serde_json::to_string(&r).unwrap()).unwrap();
            files.push(p);
        }
        let out = dir.path().join("charts");
        let (written, _notes) = plot(&files, &out).unwrap();
        assert_eq!(written.len(), 2);
        for w in &written {
            let bytes = std::fs::read(w).unwrap();
            assert_eq!(&bytes[1..4], b"PNG", "{}", w.display());
        }
        assert!(out.join("latency-readrandom.png").exists());
        // Bad input is an error, not a panic.
        std::fs::write(dir.path().join("bad.json"), "{\"schema\":\"x\"}").unwrap();
        assert!(plot(&[dir.path().join("bad.json")], &out).is_err());
    }
}
