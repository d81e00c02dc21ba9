//! `--plot FILE.svg`: line charts of a bench's results as SVG text, drawn with
//! `plotters` and one registered font (for the text's metrics; the SVG names a
//! generic family and the reader's font draws it). Every bench that plots calls
//! [`lines`]; this module knows nothing of what is measured.

use std::path::Path;

/// One line of a chart.
#[derive(Clone, Debug)]
pub struct Series {
    /// The legend's text.
    pub name: String,
    /// (x, y) points, drawn in order. On a categorical axis x is the category's index.
    pub points: Vec<(f64, f64)>,
    /// A dashed line without point marks: a reference (a model, a design loop), not a
    /// measurement of ours.
    pub reference: bool,
}

/// What the axes say.
#[derive(Clone, Debug, Default)]
pub struct Axes {
    pub title: String,
    pub x_desc: String,
    pub y_desc: String,
    /// Categories for x: a point's x is an index into these, drawn evenly spaced
    /// (for counts such as 0, 1, 10, 100 rules, which neither a linear nor a log
    /// axis shows well). `None`: a linear x axis from 0.
    pub x_labels: Option<Vec<String>>,
}

/// `path` with `-suffix` before its extension: `a/b.svg`, `2` → `a/b-2.svg`.
pub fn with_suffix(path: &Path, suffix: &str) -> std::path::PathBuf {
    let stem = path
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    let name = match path.extension() {
        Some(ext) => format!("{stem}-{suffix}.{}", ext.to_string_lossy()),
        None => format!("{stem}-{suffix}"),
    };
    path.with_file_name(name)
}

/// Draws `series` on `axes` into an 800x480 SVG at `path`. Non-finite points are left
/// out (a model's value at zero loss, say).
pub fn lines(path: &Path, axes: &Axes, series: &[Series]) -> Result<(), String> {
    use plotters::prelude::*;
    let e = |e: &dyn std::fmt::Display| format!("--plot {}: {e}", path.display());
    plotters::style::register_font(
        "sans-serif",
        FontStyle::Normal,
        dejavu::sans_mono::regular(),
    )
    .map_err(|_| e(&"the plot's font"))?;
    let finite = |&(x, y): &(f64, f64)| x.is_finite() && y.is_finite();
    let all = || {
        series
            .iter()
            .flat_map(|s| s.points.iter().copied().filter(finite))
    };
    let top = all().map(|p| p.1).fold(0.0, f64::max);
    let (x0, x1) = match &axes.x_labels {
        Some(l) => (-0.5, l.len().max(1) as f64 - 0.5),
        None => (0.0, all().map(|p| p.0).fold(0.0, f64::max).max(1.0) * 1.05),
    };
    // Room above the highest point for the legend (about a line of it in ten of
    // the plot's height per series), so that it hides no line.
    let headroom = 1.15 + 0.1 * series.len() as f64;
    let root = SVGBackend::new(path, (800, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(&axes.title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(x0..x1, 0.0..(top * headroom).max(1e-3))
        .map_err(|x| e(&x))?;
    let label = |x: &f64| match &axes.x_labels {
        Some(l) if (x - x.round()).abs() < 1e-9 && x.round() >= 0.0 => {
            l.get(x.round() as usize).cloned().unwrap_or_default()
        }
        Some(_) => String::new(),
        None => format!("{x}"),
    };
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(axes.x_desc.as_str())
        .y_desc(axes.y_desc.as_str())
        .x_label_formatter(&label);
    if let Some(l) = &axes.x_labels {
        // One tick a category (and the half-way points, which `label` leaves blank).
        mesh.x_labels(2 * l.len() + 1);
    }
    mesh.draw().map_err(|x| e(&x))?;
    let colours = [
        BLACK,
        RED,
        BLUE,
        GREEN,
        MAGENTA,
        CYAN,
        RGBColor(255, 140, 0),
        RGBColor(128, 0, 128),
    ];
    for (k, s) in series.iter().enumerate() {
        let pts: Vec<(f64, f64)> = s.points.iter().copied().filter(finite).collect();
        if pts.is_empty() {
            continue;
        }
        let c = colours[k % colours.len()];
        if s.reference {
            chart
                .draw_series(DashedLineSeries::new(pts, 6, 4, c.stroke_width(2)))
                .map_err(|x| e(&x))?
                .label(s.name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 8, y)], c.stroke_width(2))
                });
        } else {
            chart
                .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
                .map_err(|x| e(&x))?
                .label(s.name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                });
            chart
                .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, c.filled())))
                .map_err(|x| e(&x))?;
        }
    }
    // The legend goes where the lines are low: on the right when they fall.
    let rising = series
        .iter()
        .filter_map(|s| Some((s.points.first()?.1, s.points.last()?.1)))
        .filter(|(a, b)| a.is_finite() && b.is_finite())
        .map(|(a, b)| b - a)
        .sum::<f64>()
        > 0.0;
    chart
        .configure_series_labels()
        .position(if rising {
            SeriesLabelPosition::UpperLeft
        } else {
            SeriesLabelPosition::UpperRight
        })
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tiny_chart_is_an_svg_naming_its_series() {
        let path = std::env::temp_dir().join(format!("mpstack-plot-{}.svg", std::process::id()));
        let axes = Axes {
            title: "tiny".into(),
            x_desc: "rules".into(),
            y_desc: "Mpps".into(),
            x_labels: Some(vec!["0".into(), "1".into(), "10".into()]),
        };
        let series = [
            Series {
                name: "ours-series".into(),
                points: vec![(0.0, 3.0), (1.0, 2.5), (2.0, 1.0)],
                reference: false,
            },
            Series {
                name: "model-series".into(),
                points: vec![(0.0, f64::INFINITY), (1.0, 4.0), (2.0, 2.0)],
                reference: true,
            },
        ];
        lines(&path, &axes, &series).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(
            svg.trim_start().starts_with("<svg"),
            "{}",
            &svg[..svg.len().min(80)]
        );
        assert!(svg.contains("ours-series") && svg.contains("model-series"));
        assert!(svg.trim_end().ends_with("</svg>"));
    }

    #[test]
    fn a_suffix_goes_before_the_extension() {
        assert_eq!(
            with_suffix(Path::new("d/r.svg"), "2"),
            Path::new("d/r-2.svg")
        );
        assert_eq!(with_suffix(Path::new("r"), "2"), Path::new("r-2"));
    }
}
