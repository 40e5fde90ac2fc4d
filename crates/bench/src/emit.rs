//! The one way a benchmark's report reaches its reader: in the format `--format` names, on
//! the stream it is given (standard output from the command line, a buffer in tests).

use std::io::{self, Write};

use serde::Serialize;

/// Output format of the benchmarks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A table for people (also `table`).
    #[value(alias = "table")]
    Text,
    /// One JSON document.
    Json,
}

/// Writes `report` to `out`: under [`Format::Json`] one pretty-printed JSON document and a
/// newline, under [`Format::Text`] what `text` writes.
pub fn emit<R: Serialize, W: Write>(
    out: &mut W,
    format: Format,
    report: &R,
    text: impl FnOnce(&mut W) -> io::Result<()>,
) -> io::Result<()> {
    match format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, report)?;
            writeln!(out)
        }
        Format::Text => text(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct R {
        bench: &'static str,
        n: u32,
    }

    #[test]
    fn test_emit_writes_json_or_text_to_the_stream_it_is_given() {
        let r = R { bench: "x", n: 3 };
        let mut json = Vec::new();
        emit(&mut json, Format::Json, &r, |_| unreachable!()).unwrap();
        let want = serde_json::to_string_pretty(&r).unwrap() + "\n";
        assert_eq!(String::from_utf8(json).unwrap(), want);
        let mut text = Vec::new();
        emit(&mut text, Format::Text, &r, |out| {
            writeln!(out, "n = {}", r.n)
        })
        .unwrap();
        assert_eq!(text, b"n = 3\n");
    }
}
