//! A region's reader threads, started when reads need them: a region whose
//! faults never queue behind each other (one application thread, zero
//! fills, a policy that reads alone) never starts one. Each job sent while
//! every started reader is busy starts another, up to the region's limit.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc::{channel, Receiver, SendError, Sender};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;

use crate::lifecycle::spawn_service;
use crate::read_job::ReadJob;
use crate::shared::Shared;

/// The reader threads of one region and the channel that feeds them.
pub struct Readers {
    tx: Sender<ReadJob>,
    rx: Arc<Mutex<Receiver<ReadJob>>>,
    /// Jobs sent and not finished yet.
    outstanding: Arc<AtomicUsize>,
    threads: Vec<JoinHandle<()>>,
    max: usize,
    region: Weak<Shared>,
}

impl Readers {
    /// Up to `max` readers for `region`, `eager` of them started now (where
    /// a job may be sent from a signal handler, which must not start a
    /// thread). Fails only if a reader started now cannot be.
    pub fn new(region: &Arc<Shared>, max: usize, eager: usize) -> std::io::Result<Readers> {
        let (tx, rx) = channel();
        let mut readers = Readers {
            tx,
            rx: Arc::new(Mutex::new(rx)),
            outstanding: Arc::new(AtomicUsize::new(0)),
            threads: Vec::new(),
            max,
            region: Arc::downgrade(region),
        };
        for _ in 0..eager.min(max) {
            readers.start_one()?;
        }
        Ok(readers)
    }

    /// Reader threads started so far.
    pub fn started(&self) -> usize {
        self.threads.len()
    }

    /// Hands `job` to a reader, starting one if every reader is busy and
    /// the limit allows. Given back if no reader runs nor can be started
    /// (the caller reads it itself).
    pub fn send(&mut self, job: ReadJob) -> Result<(), SendError<ReadJob>> {
        let outstanding = self.outstanding.fetch_add(1, SeqCst) + 1;
        if outstanding > self.threads.len() && self.threads.len() < self.max {
            // A reader that cannot be started leaves the job to the others.
            let _ = self.start_one();
        }
        // The channel outlives the readers (kept to start more): one whose
        // readers all ended would take the job and never read it.
        if self.threads.iter().all(JoinHandle::is_finished) {
            self.outstanding.fetch_sub(1, SeqCst);
            return Err(SendError(job));
        }
        // Cannot fail: this type holds the receiving end.
        self.tx.send(job)
    }

    /// Closes the channel: the readers finish the jobs sent and return.
    /// Their threads, to be joined without the region's lock (they take it).
    pub fn close(self) -> Vec<JoinHandle<()>> {
        self.threads
    }

    fn start_one(&mut self) -> std::io::Result<()> {
        let Some(sh) = self.region.upgrade() else {
            return Err(std::io::Error::from(std::io::ErrorKind::NotConnected));
        };
        let (rx, outstanding) = (self.rx.clone(), self.outstanding.clone());
        let name = format!("pagepilot-read-{}", self.threads.len());
        let h = spawn_service(name, move || crate::fault::run_reader(sh, rx, &outstanding))?;
        self.threads.push(h);
        Ok(())
    }
}
