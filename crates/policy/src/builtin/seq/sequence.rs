//! One SEQ sequence: a run of faults to consecutive pages growing one way.

/// The direction a sequence grows in, as time increases.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dir {
    /// Increasing addresses: the head is `high_end`.
    Up,
    /// Decreasing addresses: the head is `low_end`.
    Down,
    /// One page so far: the direction cannot be determined yet.
    Nil,
}

/// The paper's `<low_end, high_end, dir>`, stored as its tail (the end the
/// sequence started from) and its length. Extension moves only the head and
/// a split keeps the tail, so positions counted from the tail ("offsets")
/// stay valid for the sequence's whole life: the on-disk range is kept in
/// offsets for that reason.
#[derive(Clone, Debug)]
pub struct Sequence {
    /// The first page of the sequence in fault order.
    pub tail: u64,
    /// Pages in the sequence, at least 1.
    pub len: u64,
    /// Growth direction.
    pub dir: Dir,
    /// Time of the most recent fault to the sequence.
    pub last: u64,
    /// Offsets `(first, last)` known to be all on disk, so the victim search
    /// skips them in one step.
    pub disk: Option<(u64, u64)>,
    /// Ring index of the most recent of the last N fault times.
    pub ring_pos: usize,
    /// Whether this table entry holds a sequence (entries are reused).
    pub live: bool,
}

impl Sequence {
    /// A new one-page sequence `<pf, pf, nil>`.
    pub fn single(pf: u64, time: u64) -> Self {
        Sequence {
            tail: pf,
            len: 1,
            dir: Dir::Nil,
            last: time,
            disk: None,
            ring_pos: 0,
            live: true,
        }
    }

    /// The paper's `low_end`.
    pub fn low(&self) -> u64 {
        match self.dir {
            Dir::Down => self.tail - (self.len - 1),
            Dir::Up | Dir::Nil => self.tail,
        }
    }

    /// The paper's `high_end`.
    pub fn high(&self) -> u64 {
        match self.dir {
            Dir::Down => self.tail,
            Dir::Up | Dir::Nil => self.tail + (self.len - 1),
        }
    }

    /// The most recently added page.
    pub fn head(&self) -> u64 {
        self.vpn_at(self.len - 1)
    }

    /// The page `offset` pages from the tail.
    pub fn vpn_at(&self, offset: u64) -> u64 {
        match self.dir {
            Dir::Down => self.tail - offset,
            Dir::Up | Dir::Nil => self.tail + offset,
        }
    }

    /// The offset of `vpn` from the tail, if the sequence covers it.
    pub fn offset_of(&self, vpn: u64) -> Option<u64> {
        let off = match self.dir {
            Dir::Down => self.tail.checked_sub(vpn)?,
            Dir::Up | Dir::Nil => vpn.checked_sub(self.tail)?,
        };
        (off < self.len).then_some(off)
    }

    /// Whether a fault on `pf` extends the sequence: `pf = high_end + 1` and
    /// `dir = up`, or `pf = low_end - 1` and `dir = down` (a nil sequence
    /// grows either way and takes its direction from this second fault).
    pub fn extended_by(&self, pf: u64) -> Option<Dir> {
        let up = self.high().checked_add(1) == Some(pf);
        let down = self.low().checked_sub(1) == Some(pf);
        match self.dir {
            Dir::Up if up => Some(Dir::Up),
            Dir::Down if down => Some(Dir::Down),
            Dir::Nil if up => Some(Dir::Up),
            Dir::Nil if down => Some(Dir::Down),
            _ => None,
        }
    }

    /// Cuts the sequence to its first `len` pages from the tail (a split),
    /// keeping what is known about on-disk pages among them.
    pub fn truncate(&mut self, len: u64) {
        debug_assert!(len >= 1 && len <= self.len);
        self.len = len;
        self.disk = match self.disk {
            Some((a, b)) if a < len => Some((a, b.min(len - 1))),
            _ => None,
        };
    }

    /// Records that the page at `offset` went to disk.
    pub fn note_on_disk(&mut self, offset: u64) {
        self.disk = match self.disk {
            None => Some((offset, offset)),
            Some((a, b)) if offset + 1 == a => Some((offset, b)),
            Some((a, b)) if offset == b + 1 => Some((a, offset)),
            keep => keep,
        };
    }

    /// Records that offsets `lo..=hi` are all on disk, merging with the known
    /// range when they touch and replacing it otherwise.
    pub fn note_run_on_disk(&mut self, lo: u64, hi: u64) {
        self.disk = match self.disk {
            Some((a, b)) if a <= hi + 1 && lo <= b + 1 => Some((a.min(lo), b.max(hi))),
            _ => Some((lo, hi)),
        };
    }
}
