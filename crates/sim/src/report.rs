//! Rows of a simulation report and their table, JSON and CSV forms.

use std::io::{self, Write};

use serde::Serialize;

/// The outcome of one (policy, memory size) run, or of one process of it in
/// a multiprogrammed run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// The policy spec, as given.
    pub policy: String,
    /// Frames of memory.
    pub frames: usize,
    /// In a parameter sweep: the policy's parameters at this point, in the
    /// sweep's order (a JSON object; one column each in tables and CSV).
    #[serde(skip_serializing_if = "Vec::is_empty", serialize_with = "as_object")]
    pub params: Vec<(String, u64)>,
    /// In a multiprogrammed run: the process, or `all` for the whole run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process: Option<String>,
    /// References simulated.
    pub references: u64,
    /// Missing faults, first touches included.
    pub faults: u64,
    /// First-touch faults.
    pub cold_faults: u64,
    /// Minor faults from reference-bit emulation.
    pub minor_faults: u64,
    /// Faults per million references.
    pub faults_per_million: f64,
    /// Mean references between faults; `None` without faults.
    pub mean_inter_fault: Option<f64>,
    /// In a multiprogrammed run, the whole run's length in reference times,
    /// idle time waiting for faults included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub elapsed: Option<u64>,
    /// What the policy reported (a policy program stopped by its budget or
    /// the watchdog, victims rejected); empty for most runs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub incidents: Vec<String>,
}

impl Row {
    /// A row with the derived rates computed from the counts.
    pub fn new(
        policy: &str,
        frames: usize,
        references: u64,
        faults: u64,
        cold_faults: u64,
        minor_faults: u64,
    ) -> Row {
        let faults_per_million = if references == 0 {
            0.0
        } else {
            faults as f64 * 1e6 / references as f64
        };
        Row {
            policy: policy.to_string(),
            frames,
            params: Vec::new(),
            process: None,
            references,
            faults,
            cold_faults,
            minor_faults,
            faults_per_million,
            mean_inter_fault: (faults > 0).then(|| references as f64 / faults as f64),
            elapsed: None,
            incidents: Vec::new(),
        }
    }
}

fn as_object<S: serde::Serializer>(params: &[(String, u64)], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = s.serialize_map(Some(params.len()))?;
    for (k, v) in params {
        map.serialize_entry(k, v)?;
    }
    map.end()
}

/// The parameter names of `rows`, in order of first appearance.
fn param_names(rows: &[Row]) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for (k, _) in rows.iter().flat_map(|r| &r.params) {
        if !names.contains(&k.as_str()) {
            names.push(k);
        }
    }
    names
}

/// How a report is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Format {
    /// Aligned columns for people.
    #[default]
    Table,
    /// A JSON array of row objects.
    Json,
    /// Comma-separated values with a header line.
    Csv,
}

/// Writes `rows` in `format`.
pub fn write(rows: &[Row], format: Format, out: &mut dyn Write) -> io::Result<()> {
    match format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, rows)?;
            writeln!(out)
        }
        Format::Csv => {
            let cells = cells(rows, false);
            for line in cells {
                writeln!(out, "{}", line.join(","))?;
            }
            Ok(())
        }
        Format::Table => {
            let cells = cells(rows, true);
            let process_column = 2 + param_names(rows).len();
            let widths: Vec<usize> = (0..cells[0].len())
                .map(|c| cells.iter().map(|l| l[c].len()).max().unwrap_or(0))
                .collect();
            for line in &cells {
                let text: Vec<String> = line
                    .iter()
                    .zip(&widths)
                    .enumerate()
                    .map(|(c, (cell, &w))| {
                        // Names flush left, numbers flush right.
                        if c == 0 || (c == process_column && has_process(rows)) {
                            format!("{cell:<w$}")
                        } else {
                            format!("{cell:>w$}")
                        }
                    })
                    .collect();
                writeln!(out, "{}", text.join("  ").trim_end())?;
            }
            Ok(())
        }
    }
}

fn has_process(rows: &[Row]) -> bool {
    rows.iter().any(|r| r.process.is_some())
}

/// The header and one line of cells per row; `human` rounds the rates.
fn cells(rows: &[Row], human: bool) -> Vec<Vec<String>> {
    let process = has_process(rows);
    let elapsed = rows.iter().any(|r| r.elapsed.is_some());
    let params = param_names(rows);
    let mut header = vec!["policy"];
    header.extend(&params);
    header.push("frames");
    if process {
        header.push("process");
    }
    header.extend([
        "references",
        "faults",
        "cold_faults",
        "minor_faults",
        "faults_per_million",
        "mean_inter_fault",
    ]);
    if elapsed {
        header.push("elapsed");
    }
    let mut lines = vec![header.into_iter().map(String::from).collect::<Vec<_>>()];
    let rate = |x: f64| {
        if human {
            format!("{x:.1}")
        } else {
            format!("{x}")
        }
    };
    for r in rows {
        let mut line = vec![csv_field(&r.policy)];
        for name in &params {
            let value = r.params.iter().find(|(k, _)| k == name);
            line.push(value.map(|(_, v)| v.to_string()).unwrap_or_default());
        }
        line.push(r.frames.to_string());
        if process {
            line.push(csv_field(r.process.as_deref().unwrap_or("")));
        }
        line.extend([
            r.references.to_string(),
            r.faults.to_string(),
            r.cold_faults.to_string(),
            r.minor_faults.to_string(),
            rate(r.faults_per_million),
            r.mean_inter_fault.map(rate).unwrap_or_else(|| {
                if human {
                    "-".into()
                } else {
                    String::new()
                }
            }),
        ]);
        if elapsed {
            line.push(r.elapsed.map(|e| e.to_string()).unwrap_or_default());
        }
        lines.push(line);
    }
    lines
}

/// Quotes a field holding a comma or a quote (specs like `seq:L=50,M=20`).
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(rows: &[Row], format: Format) -> String {
        let mut out = Vec::new();
        write(rows, format, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn test_row_rates_follow_from_counts_and_survive_zero_faults() {
        let r = Row::new("lru", 4, 2_000_000, 500, 100, 0);
        assert_eq!(r.faults_per_million, 250.0);
        assert_eq!(r.mean_inter_fault, Some(4000.0));
        let none = Row::new("lru", 4, 10, 0, 0, 0);
        assert_eq!(none.mean_inter_fault, None);
        assert!(render(&[none], Format::Table).contains(" -"));
    }

    #[test]
    fn test_json_report_has_the_required_keys() {
        let rows = [Row::new("seq:L=50,M=20", 64, 1000, 10, 3, 2)];
        let v: serde_json::Value = serde_json::from_str(&render(&rows, Format::Json)).unwrap();
        let o = &v[0];
        assert_eq!(o["policy"], "seq:L=50,M=20");
        assert_eq!(o["frames"], 64);
        assert_eq!(o["references"], 1000);
        assert_eq!(o["faults"], 10);
        assert_eq!(o["cold_faults"], 3);
        assert!(o.get("process").is_none());
    }

    #[test]
    fn test_sweep_rows_show_each_parameter_as_a_column_and_a_json_object() {
        let mut a = Row::new("seq:L=2,M=20", 64, 1000, 10, 3, 2);
        a.params = vec![("L".into(), 2), ("M".into(), 20)];
        let mut b = Row::new("seq:L=4,M=20", 64, 1000, 9, 3, 2);
        b.params = vec![("L".into(), 4), ("M".into(), 20)];
        let lru = Row::new("lru", 64, 1000, 12, 3, 0);
        let rows = [a, b, lru];
        let csv = render(&rows, Format::Csv);
        let lines: Vec<&str> = csv.lines().collect();
        assert!(
            lines[0].starts_with("policy,L,M,frames,references"),
            "{csv}"
        );
        assert!(
            lines[2].starts_with("\"seq:L=4,M=20\",4,20,64,1000,9"),
            "{csv}"
        );
        assert!(lines[3].starts_with("lru,,,64,1000,12"), "{csv}");
        let v: serde_json::Value = serde_json::from_str(&render(&rows, Format::Json)).unwrap();
        assert_eq!(v[1]["params"]["L"], 4);
        assert_eq!(v[1]["params"]["M"], 20);
        assert!(v[2].get("params").is_none());
    }

    #[test]
    fn test_csv_quotes_specs_with_commas_and_table_aligns_columns() {
        let rows = [
            Row::new("seq:L=50,M=20", 64, 1000, 10, 3, 2),
            Row::new("lru", 128, 1000, 7, 3, 0),
        ];
        let csv = render(&rows, Format::Csv);
        let lines: Vec<&str> = csv.lines().collect();
        assert!(lines[0].starts_with("policy,frames,references,faults,cold_faults"));
        assert!(lines[1].starts_with("\"seq:L=50,M=20\",64,1000,10,3,2,"));
        let table = render(&rows, Format::Table);
        let widths: Vec<usize> = table.lines().map(str::len).collect();
        assert!(widths.iter().all(|&w| w == widths[0]), "{table}");
    }
}
