//! One command: a 32-bit word holding an 8-bit operator code and three 8-bit
//! operand indexes (HiPEC's Figure 3).
//!
//! Layout, most significant byte first: `code | a | b | c`. An operand index
//! of 0 names the operand array's entry 0, which is always "no operand", so
//! the operand count is the number of leading non-zero indexes.

/// A command word. Any 32-bit value is a `Command`; the verifier decides
/// whether it means anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Command(pub u32);

impl Command {
    /// Packs an operator code and up to three operand indexes (missing ones 0).
    pub fn new(code: u8, operands: &[u8]) -> Command {
        let at = |i: usize| u32::from(operands.get(i).copied().unwrap_or(0));
        Command(u32::from(code) << 24 | at(0) << 16 | at(1) << 8 | at(2))
    }

    /// The operator code.
    pub fn code(self) -> u8 {
        (self.0 >> 24) as u8
    }

    /// The three operand indexes, 0 where absent.
    pub fn operands(self) -> [u8; 3] {
        [(self.0 >> 16) as u8, (self.0 >> 8) as u8, self.0 as u8]
    }

    /// Operands up to the first absent one.
    pub fn present(self) -> Vec<u8> {
        self.operands()
            .into_iter()
            .take_while(|&o| o != 0)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_command_word_round_trips_code_and_operands() {
        let c = Command::new(7, &[3, 250]);
        assert_eq!(c.code(), 7);
        assert_eq!(c.operands(), [3, 250, 0]);
        assert_eq!(c.present(), vec![3, 250]);
        assert_eq!(c.0, 0x0703_fa00);
    }
}
