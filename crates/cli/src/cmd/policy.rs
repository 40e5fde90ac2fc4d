//! `pagepilot policy ...`: compile, check, assemble and disassemble policy
//! programs.

use std::path::{Path, PathBuf};

use pagepilot_policy::program::{self, asm, disasm, verify, Program, Verified};

use super::CmdResult;

/// Subcommands of `pagepilot policy`.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Translate pseudo-code (or `.hpa` assembler text) into a checked,
    /// compiled program.
    Compile {
        /// Source file.
        file: PathBuf,
        /// Compiled program to write.
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Check a program (pseudo-code, assembler or compiled); non-zero exit
    /// if the checker rejects it.
    Check {
        /// Program file.
        file: PathBuf,
    },
    /// Print a program (pseudo-code, assembler or compiled) in the textual
    /// command form.
    Disasm {
        /// Program file.
        file: PathBuf,
    },
    /// Assemble the textual command form into a checked, compiled program.
    Asm {
        /// Assembler file.
        file: PathBuf,
        /// Compiled program to write.
        #[arg(short, long)]
        output: PathBuf,
    },
}

/// Runs `pagepilot policy ...`.
pub fn run(command: Command) -> CmdResult {
    match command {
        Command::Compile { file, output } => {
            let verified = program::load(&file)?;
            write(&output, &verified)
        }
        Command::Check { file } => {
            let verified = program::load(&file)?;
            let p = verified.program();
            let events: Vec<String> = p
                .events
                .iter()
                .map(|e| format!("{} ({} commands)", e.name, e.len))
                .collect();
            println!(
                "{}: ok: {} commands, {} operands, events: {}",
                file.display(),
                p.code.len(),
                p.operands.len(),
                events.join(", ")
            );
            Ok(())
        }
        Command::Disasm { file } => {
            let p = program::read(&file)?;
            print!("{}", disasm::disassemble(&p));
            if let Err(e) = verify(p) {
                eprintln!(
                    "pagepilot: warning: {}: the checker rejects it: {e}",
                    file.display()
                );
            }
            Ok(())
        }
        Command::Asm { file, output } => {
            let text = std::fs::read_to_string(&file)
                .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            let p: Program = asm::assemble(&text).map_err(|e| format!("{}:{e}", file.display()))?;
            let verified = verify(p).map_err(|e| format!("{}: rejected: {e}", file.display()))?;
            write(&output, &verified)
        }
    }
}

fn write(output: &Path, verified: &Verified) -> CmdResult {
    let bytes = verified.program().to_bytes();
    std::fs::write(output, &bytes)
        .map_err(|e| format!("cannot write {}: {e}", output.display()))?;
    println!("{}: {} bytes", output.display(), bytes.len());
    Ok(())
}
