//! The metered executor: runs one event of a verified program.
//!
//! At load the command stream is decoded once into [`Insn`]s whose operands
//! index typed slot arrays (integers, pages, queues) and whose jump targets
//! are absolute, so the loop neither decodes words nor checks types. The
//! [`super::optimise`] pass then replaces common pairs, triples and whole
//! loop idioms (the second-chance scan) with fused instructions; the
//! originals stay in place as jump targets. Every command costs one unit of
//! the event's instruction budget, fused or not (complex commands one per
//! page they pass over); at zero the event stops. A fused instruction that
//! finds less budget left than its commands need switches the event to the
//! plain (unfused) code at the same command, so a budget stop happens after
//! exactly the same commands, with the same effects, as without the
//! optimiser. Every 4096 units the loop also reads the watchdog's stop flag
//! (fused loops read it whenever they cross a multiple of 4096). The
//! verifier guarantees every index is in range, so the loop cannot panic;
//! nothing allocates per event (the call stack is reserved for the deepest
//! Activate chain).
//!
//! The hot path. The usual PageFault is one [`Insn::Idiom`]; at load each
//! event's leading idiom is copied into a per-event table, and [`Vm::run`]
//! is inlined into its caller (the policy's victim request), so such an event
//! runs without dispatch and without a call beyond the engine's [`Memory`]
//! calls; the dispatch loop stays out of line. The fused second-chance scan
//! tests the front page before unlinking it, so a referenced page is rotated
//! to the back in place, which leaves the queue as dequeue and enqueue would.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::Memory;

use super::opcode::Opcode;
use super::operand::{ArithOp, Operand, Operator, Rel, SysVar};
use super::queues::Queues;
use super::verifier::Verified;

/// A nil page reference.
pub const NIL: u32 = u32::MAX;

// Fixed slots of the system values.
const FREE: usize = 0;
const RECLAIM: usize = 1;
const RESIDENT: usize = 2;
const CAPACITY: usize = 3;
const WRITE: usize = 4;
const SYS_INTS: usize = 5;
const FAULT: usize = 0;
const VICTIM: usize = 1;
const NIL_PAGE: usize = 2;
const SYS_PAGES: usize = 3;

/// A decoded command: operands are slot indexes into the typed arrays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Insn {
    /// End the event or return to the activating one.
    Return,
    /// `ints[dst] = ints[dst] op ints[src]`.
    Arith {
        /// Operator.
        op: ArithOp,
        /// Destination.
        dst: u16,
        /// Source.
        src: u16,
    },
    /// `flag = ints[a] rel ints[b]`.
    CompInt {
        /// Relation.
        rel: Rel,
        /// Left.
        a: u16,
        /// Right.
        b: u16,
    },
    /// `flag = (pages[a] == pages[b]) != ne`.
    CompPage {
        /// Inequality instead of equality.
        ne: bool,
        /// Left.
        a: u16,
        /// Right.
        b: u16,
    },
    /// `flag = queue q empty`.
    EmptyQ {
        /// Queue.
        q: u16,
    },
    /// `flag = pages[p] in queue q`.
    InQ {
        /// Queue.
        q: u16,
        /// Page.
        p: u16,
    },
    /// Unconditional jump.
    Jump {
        /// Absolute target.
        to: u16,
    },
    /// Jump if `flag == when`.
    JumpIf {
        /// Absolute target.
        to: u16,
        /// Flag value that jumps.
        when: bool,
    },
    /// `pages[dst] = pop(q)`, flag = found.
    DeQueue {
        /// Queue.
        q: u16,
        /// Destination.
        dst: u16,
        /// Back instead of front.
        back: bool,
    },
    /// Put `pages[p]` into `q`, flag = it was a page.
    EnQueue {
        /// Queue.
        q: u16,
        /// Page.
        p: u16,
        /// Front instead of back.
        front: bool,
    },
    /// `ints[dst] = frames granted of ints[n]`.
    Request {
        /// Count.
        n: u16,
        /// Granted.
        dst: u16,
    },
    /// `ints[dst] = frames returned of ints[n]`.
    Release {
        /// Count.
        n: u16,
        /// Returned.
        dst: u16,
    },
    /// Write-back of `pages[p]`, flag = started.
    Flush {
        /// Page.
        p: u16,
    },
    /// `ints[dst] = ints[src]`.
    SetInt {
        /// Destination.
        dst: u16,
        /// Source.
        src: u16,
    },
    /// `pages[dst] = pages[src]`.
    SetPage {
        /// Destination.
        dst: u16,
        /// Source.
        src: u16,
    },
    /// `flag = referenced(pages[p])`.
    Ref {
        /// Page.
        p: u16,
    },
    /// `flag = referenced(pages[p])`, then clear it if `ints[v] == 0`.
    RefSet {
        /// Page.
        p: u16,
        /// New bit value.
        v: u16,
    },
    /// `flag = modified(pages[p])`.
    Mod {
        /// Page.
        p: u16,
    },
    /// `pages[dst] = resident page with vpn ints[vpn]`, flag = found.
    Find {
        /// Destination.
        dst: u16,
        /// Virtual page number.
        vpn: u16,
    },
    /// Run the event starting at `start`, then continue here.
    Activate {
        /// Absolute start.
        start: u16,
    },
    /// `pages[dst] = front of q` (left in place), flag = found.
    Fifo {
        /// Queue.
        q: u16,
        /// Destination.
        dst: u16,
    },
    /// Second chance over q: referenced pages get their bit cleared and go to
    /// the back; `pages[dst]` = the first unreferenced one (left in place).
    Lru {
        /// Queue.
        q: u16,
        /// Destination.
        dst: u16,
    },
    /// `pages[dst] = back of q` (left in place), flag = found.
    Mru {
        /// Queue.
        q: u16,
        /// Destination.
        dst: u16,
    },
    /// `ints[dst] = vpn of pages[p]`, or -1 for nil.
    Vpn {
        /// Destination.
        dst: u16,
        /// Page.
        p: u16,
    },
    /// Fused `ref p, v` + `jump to, when` (the clock hand's test).
    RefSetJump {
        /// Page.
        p: u16,
        /// New bit value.
        v: u16,
        /// Absolute target.
        to: u16,
        /// Flag value that jumps.
        when: bool,
    },
    /// Fused `comp a, b, rel` + `jump to, when` over integers.
    CompIntJump {
        /// Relation.
        rel: Rel,
        /// Left.
        a: u16,
        /// Right.
        b: u16,
        /// Absolute target.
        to: u16,
        /// Flag value that jumps.
        when: bool,
    },
    /// Fused `dequeue q, p` + `ref p, v` + `jump to, when`: take the next
    /// page and test (and maybe clear) its referenced bit.
    DeQueueRefJump {
        /// Queue.
        q: u16,
        /// Destination page.
        p: u16,
        /// New bit value.
        v: u16,
        /// Absolute target.
        to: u16,
        /// Flag value that jumps.
        when: bool,
    },
    /// Fused `enqueue q, p` + `jump to`.
    EnQueueJump {
        /// Queue.
        q: u16,
        /// Page.
        p: u16,
        /// Absolute target.
        to: u16,
    },
    /// `ints[dst] = length of q`.
    Count {
        /// Destination.
        dst: u16,
        /// Queue.
        q: u16,
    },
    /// The whole second-chance loop `L: dequeue q, p; ref p, v; jump R, #1;
    /// ...; R: enqueue q, p; jump L`, run natively: pages are taken from the
    /// front while referenced (bit cleared if `ints[v] == 0`) and put at the
    /// back; the first unreferenced one (or nil) is left in `pages[p]`, and
    /// execution continues after the conditional jump (`exit`). Five units
    /// per page passed over, three for the last, as unfused.
    Scan {
        /// Queue.
        q: u16,
        /// Page variable.
        p: u16,
        /// New bit value.
        v: u16,
        /// Where the loop leaves (the command after the conditional jump).
        exit: u16,
    },
    /// `activate E` where E starts with an [`Insn::Scan`] whose exit is a
    /// Return: the scan runs in place, without a call; charged as the
    /// activate, the scan and the return.
    CallScan {
        /// Absolute start of the event.
        start: u16,
        /// Queue.
        q: u16,
        /// Page variable.
        p: u16,
        /// New bit value.
        v: u16,
        /// The event's Return after the loop.
        exit: u16,
    },
    /// A whole guarded-choice event body, see [`Idiom`].
    Idiom {
        /// Index into the program's idiom table.
        index: u16,
    },
    /// Fused `enqueue q, p` (back) + `return`.
    EnQueueReturn {
        /// Queue.
        q: u16,
        /// Page.
        p: u16,
    },
    /// Fused `set dst, src` (pages) + `enqueue q, p` (back) + `return`.
    SetPageEnQueueReturn {
        /// Destination.
        dst: u16,
        /// Source.
        src: u16,
        /// Queue.
        q: u16,
        /// Page.
        p: u16,
    },
}

/// The victim choice inside an [`Idiom`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// `fifo q, dst`.
    Fifo {
        /// Queue.
        q: u16,
        /// Destination.
        dst: u16,
    },
    /// `mru q, dst`.
    Mru {
        /// Queue.
        q: u16,
        /// Destination.
        dst: u16,
    },
    /// `lru q, dst`.
    Lru {
        /// Queue.
        q: u16,
        /// Destination.
        dst: u16,
    },
    /// [`Insn::CallScan`] then `set dst, src` (pages).
    Scan {
        /// Absolute start of the scan event.
        start: u16,
        /// Queue.
        q: u16,
        /// Page variable.
        p: u16,
        /// New bit value.
        v: u16,
        /// The scan event's Return.
        exit: u16,
        /// Set destination.
        dst: u16,
        /// Set source.
        src: u16,
    },
}

/// The shape of a PageFault that names a victim only when memory is full
/// and then files the faulting page: `comp a, b, rel; jump T, when; CHOICE;
/// T: enqueue q, p; return`, where CHOICE is `fifo`, `mru` or `lru` into a
/// page, or a call of a scan event followed by `set victim, p`. Run as one
/// instruction, with the budget charged command by command as unfused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Idiom {
    /// Guard relation.
    pub rel: Rel,
    /// Guard left.
    pub a: u16,
    /// Guard right.
    pub b: u16,
    /// Guard value that skips the choice.
    pub when: bool,
    /// The choice.
    pub choice: Choice,
    /// Index of the choice's first command.
    pub at: u16,
    /// Index of the tail `enqueue; return` the guard jumps to.
    pub tail: u16,
    /// Tail queue.
    pub q: u16,
    /// Tail page.
    pub p: u16,
}

/// How an event execution ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Reached Return; `steps` budget units used.
    Returned {
        /// Units used.
        steps: u64,
    },
    /// Ran out of instruction budget.
    Budget {
        /// Units used (the whole budget).
        steps: u64,
    },
    /// Stopped by the watchdog for running past its time limit.
    Stopped {
        /// Units used until then.
        steps: u64,
    },
}

/// Inputs the executor provides to an event.
#[derive(Clone, Copy, Debug, Default)]
pub struct EventInput {
    /// The faulting page slot, or [`NIL`].
    pub fault: u32,
    /// Free frames.
    pub free: i64,
    /// Frames still to reclaim.
    pub reclaim: i64,
    /// Whether the fault is a write.
    pub write: bool,
    /// Resident pages.
    pub resident: i64,
    /// Frames the region holds.
    pub capacity: i64,
}

/// A loaded program's executable state: decoded code and its variables,
/// which keep their values from one event to the next.
#[derive(Clone, Debug)]
pub struct Vm {
    code: Vec<Insn>,
    plain: Vec<Insn>,
    idioms: Vec<Idiom>,
    starts: Vec<u16>,
    /// Per event: the idiom its first instruction is, copied here at load so
    /// the usual PageFault needs no lookup through the code.
    entries: Vec<Option<Idiom>>,
    ints: Vec<i64>,
    pages: Vec<u32>,
    queues: Queues,
    queue_names: Vec<usize>,
    stack: Vec<u16>,
    needs_counts: bool,
}

impl Vm {
    /// Decodes and optimises a verified program for a region of `slots` page
    /// slots.
    pub fn new(verified: &Verified, slots: usize) -> Vm {
        Self::with_optimiser(verified, slots, true)
    }

    /// As [`Vm::new`]; `optimise` false runs the plain decoded commands
    /// (the reference the optimiser is tested against).
    pub fn with_optimiser(verified: &Verified, slots: usize, optimise: bool) -> Vm {
        let p = verified.program();
        let mut ints = vec![0i64; SYS_INTS];
        let mut pages = vec![NIL; SYS_PAGES];
        let mut queue_names = Vec::new();
        // Slot of each operand in its class's array.
        let slot: Vec<u16> = p
            .operands
            .iter()
            .enumerate()
            .map(|(i, op)| match *op {
                Operand::Int(v) | Operand::Const(v) => {
                    ints.push(v);
                    (ints.len() - 1) as u16
                }
                Operand::Page => {
                    pages.push(NIL);
                    (pages.len() - 1) as u16
                }
                Operand::Nil => NIL_PAGE as u16,
                Operand::Queue => {
                    queue_names.push(i);
                    (queue_names.len() - 1) as u16
                }
                Operand::Sys(s) => match s {
                    SysVar::Fault => FAULT as u16,
                    SysVar::Victim => VICTIM as u16,
                    SysVar::Free => FREE as u16,
                    SysVar::Reclaim => RECLAIM as u16,
                    SysVar::Resident => RESIDENT as u16,
                    SysVar::Capacity => CAPACITY as u16,
                    SysVar::Write => WRITE as u16,
                },
                Operand::Label(l) => l,
                Operand::Event(e) => p.events.get(e as usize).map_or(0, |ev| ev.start),
                Operand::None | Operand::Op(_) => 0,
            })
            .collect();
        let mut code = Vec::with_capacity(p.code.len());
        for (e, ev) in p.events.iter().enumerate() {
            let _ = e;
            let range = ev.start as usize..ev.start as usize + ev.len as usize;
            code.resize(code.len().max(range.end), Insn::Return);
            for i in range {
                code[i] = decode(p.code[i], &p.operands, &slot, ev.start);
            }
        }
        let plain = code.clone();
        let idioms = if optimise {
            super::optimise::optimise(&mut code)
        } else {
            Vec::new()
        };
        let starts: Vec<u16> = p.events.iter().map(|e| e.start).collect();
        let entries = starts
            .iter()
            .map(|&at| match code.get(at as usize) {
                Some(&Insn::Idiom { index }) => idioms.get(index as usize).copied(),
                _ => None,
            })
            .collect();
        Vm {
            code,
            plain,
            idioms,
            starts,
            entries,
            ints,
            pages,
            queues: Queues::new(queue_names.len(), slots),
            queue_names,
            stack: Vec::with_capacity(p.events.len() + 1),
            needs_counts: p
                .operands
                .iter()
                .any(|o| matches!(o, Operand::Sys(SysVar::Resident | SysVar::Capacity))),
        }
    }

    /// Whether the program reads `resident` or `capacity` (else the executor
    /// need not ask the engine for them).
    pub fn needs_counts(&self) -> bool {
        self.needs_counts
    }

    /// The victim the last event named, or [`NIL`].
    #[inline(always)]
    pub fn victim(&self) -> u32 {
        self.pages[VICTIM]
    }

    /// A page left memory: it leaves every queue.
    #[inline(always)]
    pub fn forget(&mut self, slot: u32) {
        self.queues.remove(slot);
    }

    /// Every queued page, queue by queue in declaration order, front to back.
    pub fn queued(&self) -> Vec<u32> {
        (0..self.queues.count())
            .flat_map(|q| self.queues.iter(q).collect::<Vec<_>>())
            .collect()
    }

    /// The integer and page variables (system values first), for comparing
    /// executions.
    pub fn variables(&self) -> (&[i64], &[u32]) {
        (&self.ints, &self.pages)
    }

    /// The instructions the interpreter runs, after the optimiser.
    pub fn code(&self) -> &[Insn] {
        &self.code
    }

    /// Operand indexes of the queues, in declaration order.
    pub fn queue_operands(&self) -> &[usize] {
        &self.queue_names
    }

    /// Runs event `event` with at most `budget` units, watching `stop`.
    /// Inlined into the caller, so the usual PageFault (one idiom) costs no
    /// call beyond the engine's; everything else goes to the dispatch loop.
    #[inline(always)]
    pub fn run(
        &mut self,
        event: usize,
        input: EventInput,
        mem: &mut dyn Memory,
        budget: u64,
        stop: &AtomicBool,
    ) -> Outcome {
        // One length check for all the system values (the arrays start
        // with them).
        if let [free, reclaim, resident, capacity, write, ..] = &mut self.ints[..] {
            (*free, *reclaim, *resident) = (input.free, input.reclaim, input.resident);
            (*capacity, *write) = (input.capacity, i64::from(input.write));
        }
        if let [fault, victim, ..] = &mut self.pages[..] {
            (*fault, *victim) = (input.fault, NIL);
        }
        self.stack.clear();
        // The usual PageFault is one idiom: run it here, outside the
        // dispatch loop, when the loop's first test would pass anyway.
        if let Some(Some(d)) = self.entries.get(event) {
            if budget != 0 && (budget & 0xfff != 0 || !stop.load(Ordering::Relaxed)) {
                let (mut left, mut flag) = (budget - 1, false);
                let regs = (
                    &mut self.ints[..],
                    &mut self.pages[..],
                    &mut self.queues,
                    &mut self.stack,
                );
                return match run_idiom(d, regs, mem, &mut left, &mut flag, stop) {
                    Next::Return => Outcome::Returned {
                        steps: budget - left,
                    },
                    Next::Goto { to, plain } => self.exec(to, plain, left, flag, budget, mem, stop),
                    Next::Budget => Outcome::Budget { steps: budget },
                    Next::Refund => {
                        let pc = self.starts[event] as usize;
                        self.exec(pc, true, left + 1, flag, budget, mem, stop)
                    }
                };
            }
        }
        let pc = self.starts[event] as usize;
        self.exec(pc, false, budget, false, budget, mem, stop)
    }

    /// The dispatch loop, from `pc` (uncharged) on the optimised code or the
    /// plain one, with `left` of `budget` units.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn exec(
        &mut self,
        mut pc: usize,
        on_plain: bool,
        mut left: u64,
        mut flag: bool,
        budget: u64,
        mem: &mut dyn Memory,
        stop: &AtomicBool,
    ) -> Outcome {
        // Locals, so the loop keeps the arrays in registers across the
        // engine calls.
        let (mut code, plain, idioms, ints, pages, queues, stack) = (
            &self.code[..],
            &self.plain[..],
            &self.idioms[..],
            &mut self.ints[..],
            &mut self.pages[..],
            &mut self.queues,
            &mut self.stack,
        );
        if on_plain {
            code = plain;
        }
        // A fused instruction short of budget: refund its first unit and run
        // the plain commands from the same index, so the stop is exact.
        // Return from the event or procedure: pop the call stack, or end the event.
        macro_rules! ret {
            () => {
                match stack.pop() {
                    Some(back) => pc = back as usize,
                    None => {
                        return Outcome::Returned {
                            steps: budget - left,
                        }
                    }
                }
            };
        }
        // Enqueue page register `p` at the tail of queue `q`; the flag says whether it was a page.
        macro_rules! enqueue {
            ($q:expr, $p:expr) => {
                let s = pages[$p as usize];
                flag = s != NIL;
                if s != NIL {
                    queues.push($q as usize, s, false);
                }
            };
        }
        macro_rules! exact {
            ($run:lifetime) => {{
                code = plain;
                pc -= 1;
                left += 1;
                continue $run;
            }};
        }
        'run: loop {
            // One test per command: zero is a multiple of 4096 too.
            if left & 0xfff == 0 {
                if left == 0 {
                    return Outcome::Budget { steps: budget };
                }
                if stop.load(Ordering::Relaxed) {
                    return Outcome::Stopped {
                        steps: budget - left,
                    };
                }
            }
            left -= 1;
            let insn = code[pc];
            pc += 1;
            match insn {
                Insn::Return => ret!(),
                Insn::Arith { op, dst, src } => {
                    let (d, s) = (dst as usize, src as usize);
                    ints[d] = op.apply(ints[d], ints[s]);
                }
                Insn::CompInt { rel, a, b } => {
                    flag = rel.holds(ints[a as usize], ints[b as usize]);
                }
                Insn::CompPage { ne, a, b } => {
                    flag = (pages[a as usize] == pages[b as usize]) != ne;
                }
                Insn::EmptyQ { q } => flag = queues.len(q as usize) == 0,
                Insn::InQ { q, p } => {
                    flag = queues.contains(q as usize, pages[p as usize]);
                }
                Insn::Jump { to } => pc = to as usize,
                Insn::JumpIf { to, when } => {
                    if flag == when {
                        pc = to as usize;
                    }
                }
                Insn::DeQueue { q, dst, back } => {
                    let s = queues.pop(q as usize, back);
                    pages[dst as usize] = s;
                    flag = s != NIL;
                }
                Insn::EnQueue { q, p, front } => {
                    let s = pages[p as usize];
                    flag = s != NIL;
                    if s != NIL {
                        queues.push(q as usize, s, front);
                    }
                }
                Insn::Request { n, dst } => {
                    let want = ints[n as usize].clamp(0, i64::from(u32::MAX)) as usize;
                    ints[dst as usize] = mem.request_frames(want) as i64;
                }
                Insn::Release { n, dst } => {
                    let want = ints[n as usize].clamp(0, i64::from(u32::MAX)) as usize;
                    ints[dst as usize] = mem.release_frames(want) as i64;
                }
                Insn::Flush { p } => {
                    let s = pages[p as usize];
                    flag = s != NIL && mem.flush(s);
                }
                Insn::SetInt { dst, src } => ints[dst as usize] = ints[src as usize],
                Insn::SetPage { dst, src } => pages[dst as usize] = pages[src as usize],
                Insn::Ref { p } => {
                    let s = pages[p as usize];
                    flag = s != NIL && mem.is_referenced(s);
                }
                Insn::RefSet { p, v } => {
                    let s = pages[p as usize];
                    flag = s != NIL && mem.is_referenced(s);
                    if flag && ints[v as usize] == 0 {
                        mem.clear_referenced(s);
                    }
                }
                Insn::Mod { p } => {
                    let s = pages[p as usize];
                    flag = s != NIL && mem.is_modified(s);
                }
                Insn::Find { dst, vpn } => {
                    let v = ints[vpn as usize];
                    let found = u64::try_from(v)
                        .ok()
                        .and_then(|v| mem.page_of(v))
                        .filter(|pg| mem.is_resident(pg.slot));
                    pages[dst as usize] = found.map_or(NIL, |pg| pg.slot);
                    flag = found.is_some();
                }
                Insn::Activate { start } => {
                    stack.push(pc as u16);
                    pc = start as usize;
                }
                Insn::Fifo { q, dst } => {
                    let s = queues.front(q as usize);
                    pages[dst as usize] = s;
                    flag = s != NIL;
                }
                Insn::Mru { q, dst } => {
                    let s = queues.back(q as usize);
                    pages[dst as usize] = s;
                    flag = s != NIL;
                }
                Insn::Lru { q, dst } => {
                    let Some(s) = lru(queues, mem, q as usize, &mut left) else {
                        return Outcome::Budget { steps: budget };
                    };
                    pages[dst as usize] = s;
                    flag = s != NIL;
                }
                Insn::Vpn { dst, p } => {
                    let s = pages[p as usize];
                    ints[dst as usize] = if s != NIL && (s as usize) < mem.slots() {
                        mem.page(s).vpn as i64
                    } else {
                        -1
                    };
                }
                Insn::Count { dst, q } => ints[dst as usize] = queues.len(q as usize) as i64,
                Insn::RefSetJump { p, v, to, when } => {
                    if left == 0 {
                        exact!('run);
                    }
                    left -= 1;
                    let s = pages[p as usize];
                    flag = s != NIL && mem.is_referenced(s);
                    if flag && ints[v as usize] == 0 {
                        mem.clear_referenced(s);
                    }
                    pc = if flag == when { to as usize } else { pc + 1 };
                }
                Insn::CompIntJump {
                    rel,
                    a,
                    b,
                    to,
                    when,
                } => {
                    if left == 0 {
                        exact!('run);
                    }
                    left -= 1;
                    flag = rel.holds(ints[a as usize], ints[b as usize]);
                    pc = if flag == when { to as usize } else { pc + 1 };
                }
                Insn::DeQueueRefJump { q, p, v, to, when } => {
                    // Three commands' worth of budget, as unfused.
                    if left < 2 {
                        exact!('run);
                    }
                    left -= 2;
                    let s = queues.pop(q as usize, false);
                    pages[p as usize] = s;
                    flag = s != NIL && mem.is_referenced(s);
                    if flag && ints[v as usize] == 0 {
                        mem.clear_referenced(s);
                    }
                    pc = if flag == when { to as usize } else { pc + 2 };
                }
                Insn::EnQueueJump { q, p, to } => {
                    if left == 0 {
                        exact!('run);
                    }
                    left -= 1;
                    enqueue!(q, p);
                    pc = to as usize;
                }
                Insn::Scan { q, p, v, exit } => {
                    // Loop state: about to run the dequeue at `pc - 1`, its
                    // unit not yet charged.
                    left += 1;
                    pc -= 1;
                    let clear = ints[v as usize] == 0;
                    if !scan(queues, pages, mem, (q, p, clear), &mut left, stop) {
                        code = plain;
                        continue 'run;
                    }
                    flag = false;
                    pc = exit as usize;
                }
                Insn::CallScan {
                    start,
                    q,
                    p,
                    v,
                    exit,
                } => {
                    // Activate's unit is charged; the callee's state is
                    // "about to run its first command", the return address
                    // pushed only if the plain code has to take over.
                    let clear = ints[v as usize] == 0;
                    if !scan(queues, pages, mem, (q, p, clear), &mut left, stop) {
                        stack.push(pc as u16);
                        pc = start as usize;
                        code = plain;
                        continue 'run;
                    }
                    flag = false;
                    // The callee's Return.
                    if left == 0 {
                        stack.push(pc as u16);
                        pc = exit as usize;
                        code = plain;
                        continue 'run;
                    }
                    left -= 1;
                }
                Insn::Idiom { index } => {
                    let d = &idioms[index as usize];
                    let regs = (&mut *ints, &mut *pages, &mut *queues, &mut *stack);
                    match run_idiom(d, regs, mem, &mut left, &mut flag, stop) {
                        Next::Return => ret!(),
                        Next::Goto { to, plain: p } => {
                            if p {
                                code = plain;
                            }
                            pc = to;
                        }
                        Next::Budget => return Outcome::Budget { steps: budget },
                        Next::Refund => exact!('run),
                    }
                }
                Insn::EnQueueReturn { q, p } => {
                    if left == 0 {
                        exact!('run);
                    }
                    left -= 1;
                    enqueue!(q, p);
                    ret!()
                }
                Insn::SetPageEnQueueReturn { dst, src, q, p } => {
                    if left < 2 {
                        exact!('run);
                    }
                    left -= 2;
                    pages[dst as usize] = pages[src as usize];
                    enqueue!(q, p);
                    ret!()
                }
            }
        }
    }
}

/// Where an [`Insn::Idiom`] leaves the interpreter.
enum Next {
    /// The tail's Return ran.
    Return,
    /// Continue at `to` (uncharged), on the plain code if `plain`.
    Goto { to: usize, plain: bool },
    /// The budget ran out inside LRU's loop.
    Budget,
    /// Too little budget for the guard's jump: rerun the guard unfused.
    Refund,
}

/// Runs an [`Idiom`] whose guard's first unit is charged. Each step short of
/// budget resumes the dispatcher at that step's command, uncharged.
#[inline(always)]
fn run_idiom(
    d: &Idiom,
    (ints, pages, queues, stack): (&mut [i64], &mut [u32], &mut Queues, &mut Vec<u16>),
    mem: &mut dyn Memory,
    left: &mut u64,
    flag: &mut bool,
    stop: &AtomicBool,
) -> Next {
    if *left == 0 {
        return Next::Refund;
    }
    *left -= 1;
    *flag = d.rel.holds(ints[d.a as usize], ints[d.b as usize]);
    let at = Next::Goto {
        to: d.at as usize,
        plain: false,
    };
    if *flag != d.when {
        match d.choice {
            Choice::Fifo { q, dst } | Choice::Mru { q, dst } => {
                if *left < 3 {
                    return at;
                }
                *left -= 1;
                pages[dst as usize] = match d.choice {
                    Choice::Fifo { .. } => queues.front(q as usize),
                    _ => queues.back(q as usize),
                };
            }
            Choice::Lru { q, dst } => {
                if *left == 0 {
                    return at;
                }
                *left -= 1;
                let Some(s) = lru(queues, mem, q as usize, left) else {
                    return Next::Budget;
                };
                pages[dst as usize] = s;
                if *left < 2 {
                    *flag = s != NIL;
                    return Next::Goto {
                        to: d.tail as usize,
                        plain: false,
                    };
                }
            }
            Choice::Scan {
                start,
                q,
                p,
                v,
                exit,
                dst,
                src,
            } => {
                if *left == 0 {
                    return at;
                }
                *left -= 1;
                let clear = ints[v as usize] == 0;
                if !scan(queues, pages, mem, (q, p, clear), left, stop) {
                    stack.push(d.at + 1);
                    return Next::Goto {
                        to: start as usize,
                        plain: true,
                    };
                }
                *flag = false;
                if *left < 4 {
                    stack.push(d.at + 1);
                    return Next::Goto {
                        to: exit as usize,
                        plain: true,
                    };
                }
                // The callee's Return and the set.
                *left -= 2;
                pages[dst as usize] = pages[src as usize];
            }
        }
    } else if *left < 2 {
        return Next::Goto {
            to: d.tail as usize,
            plain: false,
        };
    }
    // The tail's enqueue and return.
    *left -= 2;
    let s = pages[d.p as usize];
    *flag = s != NIL;
    if s != NIL {
        queues.push(d.q as usize, s, false);
    }
    Next::Return
}

/// LRU's second chance over `q`, one unit per page passed over; `None` when
/// the budget ran out.
#[inline(always)]
fn lru(queues: &mut Queues, mem: &mut dyn Memory, q: usize, left: &mut u64) -> Option<u32> {
    let mut passes = queues.len(q) + 1;
    let mut s = queues.front(q);
    while s != NIL && passes > 0 && mem.is_referenced(s) {
        if *left == 0 {
            return None;
        }
        *left -= 1;
        passes -= 1;
        mem.clear_referenced(s);
        queues.rotate(q);
        s = queues.front(q);
    }
    Some(s)
}

/// The second-chance loop of [`Insn::Scan`], from "about to dequeue" with
/// `left` units: returns `true` with the unreferenced page (or nil) in
/// `pages[p]`, or `false` in the loop state, at a turn boundary, when fewer
/// than a whole turn's units are left (or the watchdog's flag is up near a
/// multiple of 4096), so the plain commands finish exactly.
#[inline(always)]
fn scan(
    queues: &mut Queues,
    pages: &mut [u32],
    mem: &mut dyn Memory,
    (q, p, clear): (u16, u16, bool),
    left: &mut u64,
    stop: &AtomicBool,
) -> bool {
    let (q, p) = (q as usize, p as usize);
    loop {
        // A full turn is five commands.
        if *left < 5 || (*left & 0xfff < 5 && stop.load(Ordering::Relaxed)) {
            return false;
        }
        // Test the front page before unlinking it: a referenced one only
        // rotates to the back, as dequeue and enqueue would leave it.
        let s = queues.front(q);
        pages[p] = s;
        if s == NIL || !mem.is_referenced(s) {
            if s != NIL {
                queues.pop(q, false);
            }
            *left -= 3;
            return true;
        }
        if clear {
            mem.clear_referenced(s);
        }
        queues.rotate(q);
        *left -= 5;
    }
}

fn decode(
    cmd: super::command::Command,
    operands: &[Operand],
    slot: &[u16],
    event_start: u16,
) -> Insn {
    let [a, b, c] = cmd.operands();
    let (sa, sb) = (slot[a as usize], slot[b as usize]);
    let op_of = |i: u8| match operands[i as usize] {
        Operand::Op(o) => Some(o),
        _ => None,
    };
    let end_back = |i: u8| i != 0 && op_of(i) == Some(Operator::End(true));
    let is_page = |i: u8| {
        matches!(operands[i as usize], Operand::Page | Operand::Nil)
            || matches!(operands[i as usize], Operand::Sys(s) if s.is_page())
    };
    // The verifier has accepted the command, so the code exists and each
    // operand has its form's type.
    match Opcode::from_code(cmd.code()).unwrap_or(Opcode::Return) {
        Opcode::Return => Insn::Return,
        Opcode::Arith | Opcode::Logic => match op_of(c) {
            Some(Operator::Arith(op)) => Insn::Arith {
                op,
                dst: sa,
                src: sb,
            },
            _ => Insn::Return,
        },
        Opcode::Comp => match op_of(c) {
            Some(Operator::Rel(rel)) if is_page(a) => Insn::CompPage {
                ne: rel == Rel::Ne,
                a: sa,
                b: sb,
            },
            Some(Operator::Rel(rel)) => Insn::CompInt { rel, a: sa, b: sb },
            _ => Insn::Return,
        },
        Opcode::EmptyQ => Insn::EmptyQ { q: sa },
        Opcode::InQ => Insn::InQ { q: sa, p: sb },
        Opcode::Jump => {
            let to = event_start + sa;
            match operands[b as usize] {
                Operand::Const(v) if b != 0 => Insn::JumpIf { to, when: v != 0 },
                _ => Insn::Jump { to },
            }
        }
        Opcode::DeQueue => Insn::DeQueue {
            q: sa,
            dst: sb,
            back: end_back(c),
        },
        Opcode::EnQueue => Insn::EnQueue {
            q: sa,
            p: sb,
            front: c != 0 && op_of(c) == Some(Operator::End(false)),
        },
        Opcode::Request => Insn::Request { n: sa, dst: sb },
        Opcode::Release => Insn::Release { n: sa, dst: sb },
        Opcode::Flush => Insn::Flush { p: sa },
        Opcode::Set if is_page(a) => Insn::SetPage { dst: sa, src: sb },
        Opcode::Set => Insn::SetInt { dst: sa, src: sb },
        Opcode::Ref if b == 0 => Insn::Ref { p: sa },
        Opcode::Ref => Insn::RefSet { p: sa, v: sb },
        Opcode::Mod => Insn::Mod { p: sa },
        Opcode::Find => Insn::Find { dst: sa, vpn: sb },
        Opcode::Activate => Insn::Activate { start: sa },
        Opcode::Fifo => Insn::Fifo { q: sa, dst: sb },
        Opcode::Lru => Insn::Lru { q: sa, dst: sb },
        Opcode::Mru => Insn::Mru { q: sa, dst: sb },
        Opcode::Vpn => Insn::Vpn { dst: sa, p: sb },
        Opcode::Count => Insn::Count { dst: sa, q: sb },
    }
}
