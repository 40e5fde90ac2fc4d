//! `Layer`: a manager of the tests' own that takes transferred dataspaces
//! and serves them unchanged, to build stacks of any depth.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use pagepilot_dataspace::{
    hand_over, Access, Capabilities, CloseError, CopyError, CreateError, DataspaceId, DeleteError,
    Flavour, IdentifyError, Identity, Lower, Manager, ManagerKey, NoSuch, OpenError, Operation,
    PageStore, Share, ShareError, TransferError, Unsupported,
};

/// A dataspace held: its store and the stack below.
type Held = (Arc<dyn PageStore>, Vec<ManagerKey>);

/// Serves the dataspaces transferred to it as they are.
pub struct Layer {
    key: ManagerKey,
    held: Mutex<HashMap<u64, Held>>,
}

impl Layer {
    pub fn new() -> Self {
        Layer {
            key: ManagerKey::fresh("layer"),
            held: Mutex::default(),
        }
    }

    fn get(&self, id: &DataspaceId) -> Option<Held> {
        match id {
            DataspaceId::Anonymous(n) => self.held.lock().unwrap().get(n).cloned(),
            _ => None,
        }
    }

    fn unsupported(op: Operation) -> Unsupported {
        Unsupported {
            manager: "layer",
            operation: op,
            flavour: None,
        }
    }
}

/// The lower store, shared by the layer and what it hands out.
struct Through(Arc<dyn PageStore>);

impl PageStore for Through {
    unsafe fn read(&self, first: usize, pages: usize, dst: *mut u8) -> std::io::Result<usize> {
        // SAFETY: the caller's guarantee, passed on.
        unsafe { self.0.read(first, pages, dst) }
    }
    unsafe fn write(&self, first: usize, pages: usize, src: *const u8) -> std::io::Result<()> {
        // SAFETY: the caller's guarantee, passed on.
        unsafe { self.0.write(first, pages, src) }
    }
    fn sync(&self) -> std::io::Result<()> {
        self.0.sync()
    }
    fn size(&self) -> u64 {
        self.0.size()
    }
    fn direct(&self) -> bool {
        self.0.direct()
    }
    fn persistent(&self) -> bool {
        self.0.persistent()
    }
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}

impl Manager for Layer {
    fn name(&self) -> &'static str {
        "layer"
    }
    fn key(&self) -> ManagerKey {
        self.key
    }
    fn interrogate(&self) -> Capabilities {
        Capabilities {
            operations: &[
                Operation::Identify,
                Operation::Open,
                Operation::Close,
                Operation::Interrogate,
                Operation::Transfer,
            ],
            flavours: &[Flavour::ReadWrite, Flavour::Stacked],
        }
    }
    fn stack(&self, id: &DataspaceId) -> Option<Vec<ManagerKey>> {
        let (_, mut stack) = self.get(id)?;
        stack.push(self.key);
        Some(stack)
    }
    fn receive(&self, lower: Lower) -> Result<DataspaceId, TransferError> {
        let mut held = self.held.lock().unwrap();
        let n = held.len() as u64;
        held.insert(n, (Arc::from(lower.store), lower.stack));
        Ok(DataspaceId::Anonymous(n))
    }
    fn identify(&self, id: &DataspaceId) -> Result<Identity, IdentifyError> {
        let no_such = NoSuch {
            manager: "layer",
            id: id.clone(),
        };
        let (store, _) = self.get(id).ok_or(no_such)?;
        Ok(Identity {
            id: id.clone(),
            manager: "layer",
            len: store.size(),
            inode: None,
        })
    }
    fn open(
        &self,
        id: &DataspaceId,
        _: Access,
        _: Option<u64>,
    ) -> Result<Box<dyn PageStore>, OpenError> {
        let no_such = NoSuch {
            manager: "layer",
            id: id.clone(),
        };
        let (store, _) = self.get(id).ok_or(no_such)?;
        Ok(Box::new(Through(store)))
    }
    fn close(&self, _: &DataspaceId, _: Box<dyn PageStore>) -> Result<(), CloseError> {
        Ok(())
    }
    fn create(&self, _: Option<&Path>, _: u64) -> Result<DataspaceId, CreateError> {
        Err(Self::unsupported(Operation::Create).into())
    }
    fn delete(&self, _: &DataspaceId) -> Result<(), DeleteError> {
        Err(Self::unsupported(Operation::Delete).into())
    }
    fn share(&self, _: &DataspaceId, _: Access) -> Result<Share, ShareError> {
        Err(Self::unsupported(Operation::Share).into())
    }
    fn copy(&self, _: &DataspaceId, _: Option<&Path>) -> Result<DataspaceId, CopyError> {
        Err(Self::unsupported(Operation::Copy).into())
    }
    fn transfer(&self, id: &DataspaceId, to: &dyn Manager) -> Result<DataspaceId, TransferError> {
        hand_over(self, id, to)
    }
}
