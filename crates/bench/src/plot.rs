//! Dependency-free SVG line charts for the benchmark report.
//!
//! Charts are committed next to the numbers they summarise, so the output is
//! deterministic: a fixed layout and palette, and coordinates rounded to one
//! decimal, so that re-running a benchmark produces a reviewable diff.

use std::fmt::{self, Write as _};

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 440.0;
const MARGIN_LEFT: f64 = 64.0;
const MARGIN_TOP: f64 = 44.0;
const MARGIN_RIGHT: f64 = 20.0;
const MARGIN_BOTTOM: f64 = 52.0;
/// Rough advance of a 12px sans-serif glyph. SVG text cannot be measured
/// without a renderer, so the legend is sized from this estimate.
const CHAR_WIDTH: f64 = 7.0;
/// Keeps the plot area usable when series names are long.
const LEGEND_MAX_WIDTH: f64 = 220.0;
/// A latency CDF has hundreds of points; markers on every one would bury the
/// line, so dense series are drawn as bare lines.
const MARKER_LIMIT: usize = 60;
/// About this many intervals per axis keeps labels apart at this chart size.
const TICK_TARGET: usize = 6;
/// Beyond this many decades the 2..9 minor lines of a log axis turn to mush.
const LOG_MINOR_MAX_DECADES: i32 = 5;
/// Labelled powers of ten per log axis, at most (roughly).
const LOG_MAJOR_MAX: i32 = 8;

/// Okabe–Ito colour-blind-safe palette, without its yellow, which is
/// unreadable on white.
const PALETTE: [&str; 7] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
];

/// How an axis maps values to positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    Linear,
    Log,
}

impl Scale {
    fn accepts(self, v: f64) -> bool {
        v.is_finite() && (self == Scale::Linear || v > 0.0)
    }
}

/// One line of a chart. Points are joined in the given order.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

impl Series {
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series {
            name: name.into(),
            points,
        }
    }
}

/// A line chart with a legend. Points that cannot be drawn (non-finite, or
/// not positive on a log axis) are left out.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x_scale: Scale,
    pub y_scale: Scale,
    pub series: Vec<Series>,
}

impl Chart {
    /// A chart with linear axes and no series; set the remaining fields with
    /// struct-update syntax.
    pub fn new(
        title: impl Into<String>,
        x_label: impl Into<String>,
        y_label: impl Into<String>,
    ) -> Self {
        Chart {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            x_scale: Scale::Linear,
            y_scale: Scale::Linear,
            series: Vec::new(),
        }
    }

    /// A standalone 720×440 SVG document.
    pub fn to_svg(&self) -> String {
        let mut svg = String::new();
        self.write_svg(&mut svg)
            .expect("writing to a String cannot fail");
        svg
    }

    fn write_svg(&self, out: &mut String) -> fmt::Result {
        let visible: Vec<Vec<(f64, f64)>> = self
            .series
            .iter()
            .map(|s| {
                s.points
                    .iter()
                    .copied()
                    .filter(|&(x, y)| self.x_scale.accepts(x) && self.y_scale.accepts(y))
                    .collect()
            })
            .collect();
        let x_axis = Axis::new(self.x_scale, visible.iter().flatten().map(|p| p.0), false);
        // Throughput and latency read honestly only against a zero baseline.
        let y_axis = Axis::new(self.y_scale, visible.iter().flatten().map(|p| p.1), true);

        let left = MARGIN_LEFT;
        let top = MARGIN_TOP;
        let right = WIDTH - MARGIN_RIGHT - self.legend_width();
        let bottom = HEIGHT - MARGIN_BOTTOM;
        let px = |x: f64| left + x_axis.frac(x) * (right - left);
        let py = |y: f64| bottom - y_axis.frac(y) * (bottom - top);

        writeln!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
        )?;
        writeln!(
            out,
            r#"<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#
        )?;
        writeln!(
            out,
            r#"<text x="{}" y="26" text-anchor="middle" font-size="16" font-weight="bold">{}</text>"#,
            c((left + right) / 2.0),
            escape(&self.title)
        )?;

        for (ticks, stroke) in [(&x_axis.minor, "#f0f0f0"), (&x_axis.major, "#dcdcdc")] {
            if ticks.is_empty() {
                continue;
            }
            writeln!(out, r#"<g stroke="{stroke}">"#)?;
            for &t in ticks {
                let x = c(px(t));
                writeln!(
                    out,
                    r#"<line x1="{x}" y1="{}" x2="{x}" y2="{}"/>"#,
                    c(top),
                    c(bottom)
                )?;
            }
            writeln!(out, "</g>")?;
        }
        for (ticks, stroke) in [(&y_axis.minor, "#f0f0f0"), (&y_axis.major, "#dcdcdc")] {
            if ticks.is_empty() {
                continue;
            }
            writeln!(out, r#"<g stroke="{stroke}">"#)?;
            for &t in ticks {
                let y = c(py(t));
                writeln!(
                    out,
                    r#"<line x1="{}" y1="{y}" x2="{}" y2="{y}"/>"#,
                    c(left),
                    c(right)
                )?;
            }
            writeln!(out, "</g>")?;
        }

        writeln!(
            out,
            r##"<path d="M{} {}V{}H{}" fill="none" stroke="#333"/>"##,
            c(left),
            c(top),
            c(bottom),
            c(right)
        )?;
        writeln!(out, r##"<g stroke="#333">"##)?;
        for &t in &x_axis.major {
            let x = c(px(t));
            writeln!(
                out,
                r#"<line x1="{x}" y1="{}" x2="{x}" y2="{}"/>"#,
                c(bottom),
                c(bottom + 5.0)
            )?;
        }
        for &t in &y_axis.major {
            let y = c(py(t));
            writeln!(
                out,
                r#"<line x1="{}" y1="{y}" x2="{}" y2="{y}"/>"#,
                c(left - 5.0),
                c(left)
            )?;
        }
        writeln!(out, "</g>")?;
        writeln!(out, r#"<g text-anchor="middle">"#)?;
        for &t in &x_axis.major {
            writeln!(
                out,
                r#"<text x="{}" y="{}">{}</text>"#,
                c(px(t)),
                c(bottom + 19.0),
                compact(t)
            )?;
        }
        writeln!(out, "</g>")?;
        writeln!(out, r#"<g text-anchor="end">"#)?;
        for &t in &y_axis.major {
            writeln!(
                out,
                r#"<text x="{}" y="{}">{}</text>"#,
                c(left - 8.0),
                c(py(t) + 4.0),
                compact(t)
            )?;
        }
        writeln!(out, "</g>")?;
        writeln!(
            out,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            c((left + right) / 2.0),
            c(HEIGHT - 12.0),
            escape(&self.x_label)
        )?;
        writeln!(
            out,
            r#"<text transform="translate(16 {}) rotate(-90)" text-anchor="middle">{}</text>"#,
            c((top + bottom) / 2.0),
            escape(&self.y_label)
        )?;

        for (i, points) in visible.iter().enumerate() {
            if points.is_empty() {
                continue;
            }
            let colour = PALETTE[i % PALETTE.len()];
            let coords: Vec<String> = points
                .iter()
                .map(|&(x, y)| format!("{},{}", c(px(x)), c(py(y))))
                .collect();
            writeln!(
                out,
                r#"<polyline fill="none" stroke="{colour}" stroke-width="2" stroke-linejoin="round" points="{}"/>"#,
                coords.join(" ")
            )?;
            if points.len() <= MARKER_LIMIT {
                writeln!(out, r#"<g fill="{colour}">"#)?;
                for &(x, y) in points {
                    writeln!(
                        out,
                        r#"<circle cx="{}" cy="{}" r="3"/>"#,
                        c(px(x)),
                        c(py(y))
                    )?;
                }
                writeln!(out, "</g>")?;
            }
        }

        let legend_x = right + 16.0;
        for (i, (series, points)) in self.series.iter().zip(&visible).enumerate() {
            let colour = PALETTE[i % PALETTE.len()];
            let y = top + 8.0 + 20.0 * i as f64;
            writeln!(
                out,
                r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{colour}" stroke-width="2"/>"#,
                c(legend_x),
                c(y),
                c(legend_x + 20.0),
                c(y)
            )?;
            if points.len() <= MARKER_LIMIT {
                writeln!(
                    out,
                    r#"<circle cx="{}" cy="{}" r="3" fill="{colour}"/>"#,
                    c(legend_x + 10.0),
                    c(y)
                )?;
            }
            writeln!(
                out,
                r#"<text x="{}" y="{}">{}</text>"#,
                c(legend_x + 26.0),
                c(y + 4.0),
                escape(&series.name)
            )?;
        }
        writeln!(out, "</svg>")
    }

    fn legend_width(&self) -> f64 {
        match self.series.iter().map(|s| s.name.chars().count()).max() {
            None => 0.0,
            Some(chars) => (16.0 + 26.0 + CHAR_WIDTH * chars as f64).min(LEGEND_MAX_WIDTH),
        }
    }
}

/// One axis: its domain in transformed units (log10 for a log scale), and the
/// tick values in data units. The domain always ends on major ticks.
#[derive(Debug)]
struct Axis {
    scale: Scale,
    lo: f64,
    hi: f64,
    major: Vec<f64>,
    minor: Vec<f64>,
}

impl Axis {
    fn new(scale: Scale, values: impl Iterator<Item = f64>, include_zero: bool) -> Self {
        let (mut lo, mut hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
        let (major, minor) = match scale {
            Scale::Linear => {
                if include_zero {
                    lo = lo.min(0.0);
                    hi = hi.max(0.0);
                }
                if lo > hi {
                    (lo, hi) = (0.0, 1.0);
                } else if lo == hi {
                    if lo == 0.0 {
                        hi = 1.0;
                    } else {
                        let pad = lo.abs() / 10.0;
                        (lo, hi) = (lo - pad, hi + pad);
                    }
                }
                (linear_ticks(lo, hi, TICK_TARGET), Vec::new())
            }
            Scale::Log => {
                if lo > hi {
                    (lo, hi) = (1.0, 10.0);
                }
                log_ticks(lo, hi)
            }
        };
        let transform = |v: f64| match scale {
            Scale::Linear => v,
            Scale::Log => v.log10(),
        };
        Axis {
            scale,
            lo: transform(major[0]),
            hi: transform(major[major.len() - 1]),
            major,
            minor,
        }
    }

    /// Position of `v` along the axis, 0 at the low end and 1 at the high end.
    fn frac(&self, v: f64) -> f64 {
        let t = match self.scale {
            Scale::Linear => v,
            Scale::Log => v.log10(),
        };
        (t - self.lo) / (self.hi - self.lo)
    }
}

/// Ticks on a 1-2-5 step covering `lo..=hi`, about `target` intervals.
/// Requires `lo < hi`; returns at least two ticks.
fn linear_ticks(lo: f64, hi: f64, target: usize) -> Vec<f64> {
    let rough = (hi - lo) / target as f64;
    let exp = floor_log10(rough);
    let f = rough / decimal(1, exp);
    let mantissa = if f <= 1.0 {
        1
    } else if f <= 2.0 {
        2
    } else if f <= 5.0 {
        5
    } else {
        10
    };
    let step = decimal(mantissa, exp);
    // The slack absorbs quotients like 0.3 / 0.1 = 2.9999999999999996, which
    // would otherwise add a tick outside the data.
    let first = (lo / step + 1e-9).floor() as i64;
    let last = ((hi / step - 1e-9).ceil() as i64).max(first + 1);
    (first..=last).map(|i| decimal(i * mantissa, exp)).collect()
}

/// Major and minor ticks for a log axis covering `lo..=hi` (both positive):
/// whole decades, with 2 and 5 promoted to labels when only one decade shows.
fn log_ticks(lo: f64, hi: f64) -> (Vec<f64>, Vec<f64>) {
    let mut lo_exp = floor_log10(lo);
    let mut hi_exp = ceil_log10(hi).max(lo_exp + 1);
    let stride = (hi_exp - lo_exp + LOG_MAJOR_MAX - 1) / LOG_MAJOR_MAX;
    // Aligning to the stride gives 1, 1k, 1M rather than 10, 10k, 10M.
    lo_exp = lo_exp.div_euclid(stride) * stride;
    hi_exp = (hi_exp + stride - 1).div_euclid(stride) * stride;
    let decades = hi_exp - lo_exp;

    let mut major = Vec::new();
    let mut minor = Vec::new();
    for exp in lo_exp..=hi_exp {
        if (exp - lo_exp) % stride == 0 {
            major.push(decimal(1, exp));
        } else {
            minor.push(decimal(1, exp));
        }
        if exp == hi_exp || stride > 1 {
            continue;
        }
        if decades == 1 {
            major.extend([decimal(2, exp), decimal(5, exp)]);
            minor.extend([3, 4, 6, 7, 8, 9].map(|m| decimal(m, exp)));
        } else if decades <= LOG_MINOR_MAX_DECADES {
            minor.extend((2..=9).map(|m| decimal(m, exp)));
        }
    }
    (major, minor)
}

/// `mantissa × 10^exp`, correctly rounded, so that tick values print cleanly
/// (0.3, not 0.30000000000000004).
fn decimal(mantissa: i64, exp: i32) -> f64 {
    format!("{mantissa}e{exp}")
        .parse()
        .expect("an integer with an exponent is a valid float literal")
}

/// Exponent of the largest power of ten not above `v` (positive), corrected
/// for `log10` rounding at exact powers of ten.
fn floor_log10(v: f64) -> i32 {
    let exp = v.log10().floor() as i32;
    if decimal(1, exp) > v {
        exp - 1
    } else if decimal(1, exp + 1) <= v {
        exp + 1
    } else {
        exp
    }
}

fn ceil_log10(v: f64) -> i32 {
    let exp = floor_log10(v);
    if decimal(1, exp) == v {
        exp
    } else {
        exp + 1
    }
}

/// Compact number label: 1.5k, 2M, 0.001, with at most three significant
/// decimals after scaling.
fn compact(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        return "0".to_string();
    }
    if !(1e-4..1e15).contains(&a) {
        return format!("{v:e}");
    }
    let (scaled, suffix) = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
        .into_iter()
        .find(|&(unit, _)| a >= unit)
        .map_or((v, ""), |(unit, suffix)| (v / unit, suffix));
    let decimals = if scaled.abs() >= 1.0 {
        3
    } else {
        (2 - floor_log10(scaled.abs())) as usize
    };
    let mut s = format!("{scaled:.decimals$}");
    if s.contains('.') {
        s.truncate(s.trim_end_matches('0').trim_end_matches('.').len());
    }
    s + suffix
}

/// A coordinate, rounded to one decimal: finer precision is invisible in the
/// picture and would carry float noise into diffs.
fn c(v: f64) -> String {
    format!("{v:.1}")
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            _ => out.push(ch),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks that every non-self-closing tag is closed in order.
    fn assert_well_formed(svg: &str) {
        assert!(svg.starts_with("<svg "), "{svg}");
        assert!(svg.trim_end().ends_with("</svg>"), "{svg}");
        let mut stack = Vec::new();
        let mut rest = svg;
        while let Some(start) = rest.find('<') {
            let end = start + rest[start..].find('>').expect("unterminated tag");
            let tag = &rest[start + 1..end];
            let name = |t: &str| t.split_whitespace().next().unwrap_or("").to_string();
            if let Some(closing) = tag.strip_prefix('/') {
                assert_eq!(stack.pop(), Some(name(closing)), "{svg}");
            } else if !tag.ends_with('/') {
                stack.push(name(tag));
            }
            rest = &rest[end + 1..];
        }
        assert!(stack.is_empty(), "unclosed {stack:?}");
    }

    fn polylines(svg: &str) -> usize {
        svg.matches("<polyline").count()
    }

    #[test]
    fn linear_ticks_are_nice() {
        assert_eq!(
            linear_ticks(0.0, 97.0, 6),
            [0.0, 20.0, 40.0, 60.0, 80.0, 100.0]
        );
        assert_eq!(linear_ticks(0.0, 1.0, 6), [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]);
        assert_eq!(linear_ticks(0.3, 0.7, 6), [0.3, 0.4, 0.5, 0.6, 0.7]);
        assert_eq!(
            linear_ticks(-3.0, 7.0, 6),
            [-4.0, -2.0, 0.0, 2.0, 4.0, 6.0, 8.0]
        );
        assert_eq!(
            linear_ticks(1234.0, 1789.0, 6),
            [1200.0, 1300.0, 1400.0, 1500.0, 1600.0, 1700.0, 1800.0]
        );
        assert_eq!(
            linear_ticks(0.0, 250_000.0, 6),
            [0.0, 50e3, 100e3, 150e3, 200e3, 250e3]
        );
    }

    #[test]
    fn log_ticks_are_decades() {
        let (major, minor) = log_ticks(1000.0, 1e6);
        assert_eq!(major, [1e3, 1e4, 1e5, 1e6]);
        assert_eq!(minor.len(), 3 * 8);

        let (major, minor) = log_ticks(0.3, 45.0);
        assert_eq!(major, [0.1, 1.0, 10.0, 100.0]);
        assert!(minor.contains(&0.2) && minor.contains(&90.0));
        assert!(minor.iter().all(|&m| (0.1..100.0).contains(&m)));

        let (major, minor) = log_ticks(3.0, 7.0);
        assert_eq!(major, [1.0, 2.0, 5.0, 10.0]);
        assert_eq!(minor, [3.0, 4.0, 6.0, 7.0, 8.0, 9.0]);

        // Exact powers of ten stay on the boundary instead of adding a decade.
        let (major, _) = log_ticks(1.0, 10.0);
        assert_eq!(major, [1.0, 2.0, 5.0, 10.0]);

        // Too many decades to label each: every other one, aligned.
        let (major, minor) = log_ticks(1e-3, 1e9);
        assert_eq!(major, [1e-4, 1e-2, 1.0, 1e2, 1e4, 1e6, 1e8, 1e10]);
        assert_eq!(minor, [1e-3, 1e-1, 10.0, 1e3, 1e5, 1e7, 1e9]);
    }

    #[test]
    fn compact_labels() {
        let cases = [
            (0.0, "0"),
            (1.0, "1"),
            (0.5, "0.5"),
            (0.001, "0.001"),
            (0.0015, "0.0015"),
            (12.0, "12"),
            (999.0, "999"),
            (1000.0, "1k"),
            (1500.0, "1.5k"),
            (10_000.0, "10k"),
            (250_000.0, "250k"),
            (1e6, "1M"),
            (2e6, "2M"),
            (1.002e6, "1.002M"),
            (3e9, "3G"),
            (-1500.0, "-1.5k"),
            (1e-7, "1e-7"),
        ];
        for (v, want) in cases {
            assert_eq!(compact(v), want, "{v}");
        }
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(
            escape(r#"a<b & "c" 'd'>"#),
            "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;"
        );
        let chart = Chart {
            series: vec![Series::new("<x&y>", vec![(1.0, 2.0)])],
            ..Chart::new("R&D <1>", "x \"q\"", "y's")
        };
        let svg = chart.to_svg();
        assert!(svg.contains("R&amp;D &lt;1&gt;"));
        assert!(svg.contains("x &quot;q&quot;"));
        assert!(svg.contains("y&apos;s"));
        assert!(svg.contains("&lt;x&amp;y&gt;"));
        assert_well_formed(&svg);
    }

    #[test]
    fn unplottable_points_are_skipped() {
        let chart = Chart {
            x_scale: Scale::Log,
            series: vec![
                Series::new(
                    "mixed",
                    vec![
                        (f64::NAN, 1.0),
                        (10.0, f64::INFINITY),
                        (0.0, 1.0),
                        (-5.0, 1.0),
                        (10.0, 5.0),
                        (100.0, 7.0),
                    ],
                ),
                Series::new("nothing plottable", vec![(0.0, 1.0), (f64::NAN, f64::NAN)]),
            ],
            ..Chart::new("t", "x", "y")
        };
        let svg = chart.to_svg();
        assert_well_formed(&svg);
        assert_eq!(polylines(&svg), 1);
        let line = svg.lines().find(|l| l.starts_with("<polyline")).unwrap();
        assert_eq!(line.matches(',').count(), 2, "{line}");
        assert_eq!(svg.matches("<circle").count(), 2 + 2);
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }

    #[test]
    fn log_y_skips_non_positive() {
        let chart = Chart {
            y_scale: Scale::Log,
            series: vec![Series::new("s", vec![(1.0, 0.0), (2.0, -1.0), (3.0, 0.5)])],
            ..Chart::new("t", "x", "y")
        };
        let svg = chart.to_svg();
        assert_well_formed(&svg);
        let line = svg.lines().find(|l| l.starts_with("<polyline")).unwrap();
        assert_eq!(line.matches(',').count(), 1, "{line}");
    }

    #[test]
    fn degenerate_charts_render() {
        let empty = Chart::new("empty", "x", "y");
        let with_empty_series = Chart {
            series: vec![Series::new("none", Vec::new())],
            ..Chart::new("empty series", "x", "y")
        };
        let log_empty = Chart {
            x_scale: Scale::Log,
            y_scale: Scale::Log,
            ..Chart::new("empty log", "x", "y")
        };
        let single = Chart {
            series: vec![Series::new("one", vec![(5.0, 42.0)])],
            ..Chart::new("single", "x", "y")
        };
        let single_zero = Chart {
            series: vec![Series::new("zero", vec![(0.0, 0.0)])],
            ..Chart::new("single zero", "x", "y")
        };
        let single_log = Chart {
            x_scale: Scale::Log,
            y_scale: Scale::Log,
            series: vec![Series::new("one", vec![(1000.0, 1.0)])],
            ..Chart::new("single log", "x", "y")
        };
        for (chart, lines) in [
            (empty, 0),
            (with_empty_series, 0),
            (log_empty, 0),
            (single, 1),
            (single_zero, 1),
            (single_log, 1),
        ] {
            let svg = chart.to_svg();
            assert_well_formed(&svg);
            assert_eq!(polylines(&svg), lines, "{svg}");
            assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
            assert!(
                svg.matches("<text").count() >= 4,
                "axes are labelled: {svg}"
            );
        }
    }

    #[test]
    fn one_polyline_per_non_empty_series() {
        let series = (0..9)
            .map(|i| {
                let points = if i % 3 == 0 {
                    Vec::new()
                } else {
                    (0..5).map(|x| (x as f64, (x * i) as f64)).collect()
                };
                Series::new(format!("s{i}"), points)
            })
            .collect();
        let chart = Chart {
            series,
            ..Chart::new("many", "x", "y")
        };
        let svg = chart.to_svg();
        assert_well_formed(&svg);
        assert_eq!(polylines(&svg), 6);
        assert_eq!(svg, chart.to_svg(), "output is deterministic");
    }

    #[test]
    fn dense_series_have_no_markers() {
        let cdf = (1..=1000)
            .map(|i| (i as f64 / 10.0, i as f64 / 1000.0))
            .collect();
        let chart = Chart {
            x_scale: Scale::Log,
            series: vec![Series::new("cdf", cdf)],
            ..Chart::new("cdf", "latency", "fraction")
        };
        let svg = chart.to_svg();
        assert_well_formed(&svg);
        assert_eq!(svg.matches("<circle").count(), 0);
    }
}
