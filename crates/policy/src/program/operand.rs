//! The operand array: up to 256 typed entries a command's operand bytes index.
//!
//! Entry 0 is always [`Operand::None`], so an operand byte of 0 means "no
//! operand" and a command's operand count is the number of leading non-zero
//! bytes. Everything a command touches is an entry here: integer variables
//! and constants, page references, page queues, jump targets, events, the
//! operators of Arith/Comp/Logic, and the system values the executor fills in
//! before each event (the faulting page, free frames, ...).

/// Most entries an operand array may hold (operand bytes are 8 bits).
pub const MAX_OPERANDS: usize = 256;

/// Arithmetic and bitwise operators of Arith and Logic (`dst = dst op src`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArithOp {
    /// Wrapping addition.
    Add,
    /// Wrapping subtraction.
    Sub,
    /// Wrapping multiplication.
    Mul,
    /// Division; by zero gives 0.
    Div,
    /// Remainder; by zero gives 0.
    Mod,
    /// Smaller of the two.
    Min,
    /// Larger of the two.
    Max,
    /// Bitwise and (Logic).
    And,
    /// Bitwise or (Logic).
    Or,
    /// Bitwise exclusive or (Logic).
    Xor,
    /// Logical not of `src` (0 becomes 1, anything else 0) (Logic).
    Not,
}

/// Relations of Comp (`flag = a rel b`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rel {
    /// Equal.
    Eq,
    /// Not equal.
    Ne,
    /// Less than.
    Lt,
    /// Less than or equal.
    Le,
    /// Greater than.
    Gt,
    /// Greater than or equal.
    Ge,
}

/// Operators, as one operand kind: which command accepts which is checked by
/// the verifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operator {
    /// An Arith or Logic operator.
    Arith(ArithOp),
    /// A Comp relation.
    Rel(Rel),
    /// Which end of a queue DeQueue/EnQueue works on: `false` front, `true` back.
    End(bool),
}

/// Values the executor provides to every event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SysVar {
    /// Page: the faulting page (nil in ReclaimFrame). Read-only.
    Fault,
    /// Page: the frame to take, named by PageFault when no frame is free and
    /// by ReclaimFrame. Starts nil; writable.
    Victim,
    /// Integer: free frames of the region before the fault is served. Read-only.
    Free,
    /// Integer: frames the frame manager still takes back (ReclaimFrame), 0
    /// otherwise. Read-only.
    Reclaim,
    /// Integer: resident pages. Read-only.
    Resident,
    /// Integer: frames the region holds. Read-only.
    Capacity,
    /// Integer: 1 if the fault is a write, else 0. Read-only.
    Write,
}

impl SysVar {
    /// All system values, in encoding order.
    pub const ALL: [SysVar; 7] = [
        SysVar::Fault,
        SysVar::Victim,
        SysVar::Free,
        SysVar::Reclaim,
        SysVar::Resident,
        SysVar::Capacity,
        SysVar::Write,
    ];

    /// Source and assembler name.
    pub fn name(self) -> &'static str {
        match self {
            SysVar::Fault => "fault",
            SysVar::Victim => "victim",
            SysVar::Free => "free",
            SysVar::Reclaim => "reclaim",
            SysVar::Resident => "resident",
            SysVar::Capacity => "capacity",
            SysVar::Write => "write",
        }
    }

    /// Looks a system value up by name.
    pub fn by_name(name: &str) -> Option<SysVar> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Whether it holds a page (else an integer).
    pub fn is_page(self) -> bool {
        matches!(self, SysVar::Fault | SysVar::Victim)
    }

    /// Whether programs may write it.
    pub fn writable(self) -> bool {
        self == SysVar::Victim
    }
}

/// One entry of the operand array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operand {
    /// Entry 0: no operand.
    None,
    /// A writable integer variable with its initial value.
    Int(i64),
    /// A read-only integer.
    Const(i64),
    /// A writable page reference, initially nil.
    Page,
    /// A read-only page reference that is always nil.
    Nil,
    /// A page queue, initially empty.
    Queue,
    /// A jump target: a command index relative to the start of its event.
    Label(u16),
    /// An event, by index into the program's event table.
    Event(u8),
    /// An operator of Arith, Logic or Comp, or a queue end.
    Op(Operator),
    /// A value the executor provides.
    Sys(SysVar),
}

/// The type classes the verifier checks operands against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    /// Any integer (variable, constant or system integer).
    Int,
    /// A page reference (variable, nil or system page).
    Page,
    /// A queue.
    Queue,
    /// A jump target.
    Label,
    /// An event.
    Event,
    /// An Arith operator (add .. max).
    ArithOp,
    /// A Logic operator (and, or, xor, not).
    LogicOp,
    /// A Comp relation.
    Rel,
    /// A queue end (front/back).
    End,
    /// Integer or page (Set, Comp); both operands of one command alike.
    Value,
    /// A read-only integer constant.
    ConstInt,
}

impl Class {
    /// Name used in errors and the reference page.
    pub fn name(self) -> &'static str {
        match self {
            Class::Int => "integer",
            Class::Page => "page",
            Class::Queue => "queue",
            Class::Label => "label",
            Class::Event => "event",
            Class::ArithOp => "arith operator",
            Class::LogicOp => "logic operator",
            Class::Rel => "relation",
            Class::End => "queue end",
            Class::Value => "integer or page",
            Class::ConstInt => "integer constant",
        }
    }
}

impl ArithOp {
    /// Whether this is a Logic operator (else an Arith one).
    pub fn is_logic(self) -> bool {
        matches!(
            self,
            ArithOp::And | ArithOp::Or | ArithOp::Xor | ArithOp::Not
        )
    }

    /// All operators, in encoding order.
    pub const ALL: [ArithOp; 11] = [
        ArithOp::Add,
        ArithOp::Sub,
        ArithOp::Mul,
        ArithOp::Div,
        ArithOp::Mod,
        ArithOp::Min,
        ArithOp::Max,
        ArithOp::And,
        ArithOp::Or,
        ArithOp::Xor,
        ArithOp::Not,
    ];

    /// Assembler name.
    pub fn name(self) -> &'static str {
        match self {
            ArithOp::Add => "add",
            ArithOp::Sub => "sub",
            ArithOp::Mul => "mul",
            ArithOp::Div => "div",
            ArithOp::Mod => "mod",
            ArithOp::Min => "min",
            ArithOp::Max => "max",
            ArithOp::And => "and",
            ArithOp::Or => "or",
            ArithOp::Xor => "xor",
            ArithOp::Not => "not",
        }
    }

    /// Applies the operator; never panics.
    #[inline]
    pub fn apply(self, a: i64, b: i64) -> i64 {
        match self {
            ArithOp::Add => a.wrapping_add(b),
            ArithOp::Sub => a.wrapping_sub(b),
            ArithOp::Mul => a.wrapping_mul(b),
            ArithOp::Div => a.checked_div(b).unwrap_or(0),
            ArithOp::Mod => a.checked_rem(b).unwrap_or(0),
            ArithOp::Min => a.min(b),
            ArithOp::Max => a.max(b),
            ArithOp::And => a & b,
            ArithOp::Or => a | b,
            ArithOp::Xor => a ^ b,
            ArithOp::Not => i64::from(b == 0),
        }
    }
}

impl Rel {
    /// All relations, in encoding order.
    pub const ALL: [Rel; 6] = [Rel::Eq, Rel::Ne, Rel::Lt, Rel::Le, Rel::Gt, Rel::Ge];

    /// Assembler name.
    pub fn name(self) -> &'static str {
        match self {
            Rel::Eq => "eq",
            Rel::Ne => "ne",
            Rel::Lt => "lt",
            Rel::Le => "le",
            Rel::Gt => "gt",
            Rel::Ge => "ge",
        }
    }

    /// Compares two integers.
    #[inline]
    pub fn holds(self, a: i64, b: i64) -> bool {
        match self {
            Rel::Eq => a == b,
            Rel::Ne => a != b,
            Rel::Lt => a < b,
            Rel::Le => a <= b,
            Rel::Gt => a > b,
            Rel::Ge => a >= b,
        }
    }
}

impl Operator {
    /// Assembler name.
    pub fn name(self) -> &'static str {
        match self {
            Operator::Arith(a) => a.name(),
            Operator::Rel(r) => r.name(),
            Operator::End(false) => "front",
            Operator::End(true) => "back",
        }
    }

    /// Looks an operator up by assembler name.
    pub fn by_name(name: &str) -> Option<Operator> {
        ArithOp::ALL
            .into_iter()
            .find(|a| a.name() == name)
            .map(Operator::Arith)
            .or_else(|| {
                Rel::ALL
                    .into_iter()
                    .find(|r| r.name() == name)
                    .map(Operator::Rel)
            })
            .or(match name {
                "front" => Some(Operator::End(false)),
                "back" => Some(Operator::End(true)),
                _ => None,
            })
    }
}

impl Operand {
    /// Whether the operand belongs to `class`.
    pub fn is(self, class: Class) -> bool {
        match class {
            Class::Int => {
                matches!(self, Operand::Int(_) | Operand::Const(_))
                    || matches!(self, Operand::Sys(s) if !s.is_page())
            }
            Class::Page => {
                matches!(self, Operand::Page | Operand::Nil)
                    || matches!(self, Operand::Sys(s) if s.is_page())
            }
            Class::Queue => self == Operand::Queue,
            Class::Label => matches!(self, Operand::Label(_)),
            Class::Event => matches!(self, Operand::Event(_)),
            Class::ArithOp => matches!(self, Operand::Op(Operator::Arith(a)) if !a.is_logic()),
            Class::LogicOp => matches!(self, Operand::Op(Operator::Arith(a)) if a.is_logic()),
            Class::Rel => matches!(self, Operand::Op(Operator::Rel(_))),
            Class::End => matches!(self, Operand::Op(Operator::End(_))),
            Class::Value => self.is(Class::Int) || self.is(Class::Page),
            Class::ConstInt => matches!(self, Operand::Const(_)),
        }
    }

    /// Whether commands may write the operand.
    pub fn writable(self) -> bool {
        match self {
            Operand::Int(_) | Operand::Page => true,
            Operand::Sys(s) => s.writable(),
            _ => false,
        }
    }

    /// Short kind name, for errors.
    pub fn kind(self) -> &'static str {
        match self {
            Operand::None => "none",
            Operand::Int(_) => "int",
            Operand::Const(_) => "const",
            Operand::Page => "page",
            Operand::Nil => "nil",
            Operand::Queue => "queue",
            Operand::Label(_) => "label",
            Operand::Event(_) => "event",
            Operand::Op(_) => "operator",
            Operand::Sys(s) if s.is_page() => "system page",
            Operand::Sys(_) => "system integer",
        }
    }
}
