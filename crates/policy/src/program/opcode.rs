//! Operator codes: the command set and each command's operand signature.
//!
//! Codes 0..=19 are the twenty commands HiPEC names; 20 and 21 (Vpn, Count)
//! were added for SEQ-like policies, which need a page's virtual page number
//! and a queue's length. Codes up to 255 stay open for new commands: add a
//! variant, its code, name and signature here, and its semantics in the
//! interpreter.

use super::operand::Class;

/// One operand position of a signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arg {
    /// What the operand must be.
    pub class: Class,
    /// Whether the command writes it (then it must be writable).
    pub write: bool,
}

const fn r(class: Class) -> Arg {
    Arg {
        class,
        write: false,
    }
}

const fn w(class: Class) -> Arg {
    Arg { class, write: true }
}

const RI: Arg = r(Class::Int);
const WI: Arg = w(Class::Int);
const RP: Arg = r(Class::Page);
const WP: Arg = w(Class::Page);
const RQ: Arg = r(Class::Queue);
const RL: Arg = r(Class::Label);
const RE: Arg = r(Class::Event);
const RAO: Arg = r(Class::ArithOp);
const RLO: Arg = r(Class::LogicOp);
const RREL: Arg = r(Class::Rel);
const REND: Arg = r(Class::End);
const RV: Arg = r(Class::Value);
const WV: Arg = w(Class::Value);
const RCI: Arg = r(Class::ConstInt);

/// A command's operator code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Opcode {
    /// End the event (or return from an Activate'd one).
    Return = 0,
    /// `dst = dst op src` over integers.
    Arith = 1,
    /// `flag = a rel b`.
    Comp = 2,
    /// `dst = dst op src`, bitwise and/or/xor, or `dst = !src`.
    Logic = 3,
    /// `flag = queue is empty`.
    EmptyQ = 4,
    /// `flag = page is in queue`.
    InQ = 5,
    /// Jump, always or when the flag equals a constant.
    Jump = 6,
    /// Remove a page from one end of a queue.
    DeQueue = 7,
    /// Put a page at one end of a queue.
    EnQueue = 8,
    /// Ask the frame manager for more frames.
    Request = 9,
    /// Give free frames back to the frame manager.
    Release = 10,
    /// Start an asynchronous write-back of a page.
    Flush = 11,
    /// Copy an integer or page reference.
    Set = 12,
    /// Read (and optionally clear) a page's referenced bit.
    Ref = 13,
    /// Read a page's modified bit.
    Mod = 14,
    /// Find the page with a virtual page number.
    Find = 15,
    /// Run another event like a procedure.
    Activate = 16,
    /// Name a queue's first-in page.
    Fifo = 17,
    /// Name a queue's least recently used page (second chance).
    Lru = 18,
    /// Name a queue's most recently added page.
    Mru = 19,
    /// A page's virtual page number.
    Vpn = 20,
    /// A queue's length.
    Count = 21,
}

impl Opcode {
    /// Every command, in code order.
    pub const ALL: [Opcode; 22] = [
        Opcode::Return,
        Opcode::Arith,
        Opcode::Comp,
        Opcode::Logic,
        Opcode::EmptyQ,
        Opcode::InQ,
        Opcode::Jump,
        Opcode::DeQueue,
        Opcode::EnQueue,
        Opcode::Request,
        Opcode::Release,
        Opcode::Flush,
        Opcode::Set,
        Opcode::Ref,
        Opcode::Mod,
        Opcode::Find,
        Opcode::Activate,
        Opcode::Fifo,
        Opcode::Lru,
        Opcode::Mru,
        Opcode::Vpn,
        Opcode::Count,
    ];

    /// Decodes an operator code; `None` if no command has it.
    pub fn from_code(code: u8) -> Option<Opcode> {
        Self::ALL.get(code as usize).copied()
    }

    /// The operator code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// Assembler mnemonic (lower case).
    pub fn name(self) -> &'static str {
        match self {
            Opcode::Return => "return",
            Opcode::Arith => "arith",
            Opcode::Comp => "comp",
            Opcode::Logic => "logic",
            Opcode::EmptyQ => "emptyq",
            Opcode::InQ => "inq",
            Opcode::Jump => "jump",
            Opcode::DeQueue => "dequeue",
            Opcode::EnQueue => "enqueue",
            Opcode::Request => "request",
            Opcode::Release => "release",
            Opcode::Flush => "flush",
            Opcode::Set => "set",
            Opcode::Ref => "ref",
            Opcode::Mod => "mod",
            Opcode::Find => "find",
            Opcode::Activate => "activate",
            Opcode::Fifo => "fifo",
            Opcode::Lru => "lru",
            Opcode::Mru => "mru",
            Opcode::Vpn => "vpn",
            Opcode::Count => "count",
        }
    }

    /// Looks a mnemonic up (case-insensitive).
    pub fn by_name(name: &str) -> Option<Opcode> {
        Self::ALL
            .into_iter()
            .find(|o| o.name().eq_ignore_ascii_case(name))
    }

    /// The accepted operand lists; a command must match one of them exactly.
    pub fn forms(self) -> &'static [&'static [Arg]] {
        match self {
            Opcode::Return => &[&[]],
            Opcode::Arith => &[&[WI, RI, RAO]],
            Opcode::Comp => &[&[RV, RV, RREL]],
            Opcode::Logic => &[&[WI, RI, RLO]],
            Opcode::EmptyQ => &[&[RQ]],
            Opcode::InQ => &[&[RQ, RP]],
            Opcode::Jump => &[&[RL], &[RL, RCI]],
            Opcode::DeQueue => &[&[RQ, WP], &[RQ, WP, REND]],
            Opcode::EnQueue => &[&[RQ, RP], &[RQ, RP, REND]],
            Opcode::Request | Opcode::Release => &[&[RI, WI]],
            Opcode::Flush | Opcode::Mod => &[&[RP]],
            Opcode::Set => &[&[WV, RV]],
            Opcode::Ref => &[&[RP], &[RP, RI]],
            Opcode::Find => &[&[WP, RI]],
            Opcode::Activate => &[&[RE]],
            Opcode::Fifo | Opcode::Lru | Opcode::Mru => &[&[RQ, WP]],
            Opcode::Vpn => &[&[WI, RP]],
            Opcode::Count => &[&[WI, RQ]],
        }
    }

    /// Whether control never falls through to the next command.
    pub fn ends_flow(self) -> bool {
        self == Opcode::Return
    }
}
