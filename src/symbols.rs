//! Symbol interning: symbol names to dense ids `0..max_symbols`.
//!
//! Dense ids let the slots and the publisher's routing tables be plain arrays.
//! The table has a fixed capacity chosen at start; a new symbol past it is a
//! poison tick (`symbol_limit`), never a reallocation.
//!
//! Ownership: single writer (the feed thread, through [`SymbolInterner`]);
//! any number of readers (the publisher) through [`SymbolTable`]. A name is
//! written once, before the length that makes it visible is published with
//! `Release`; readers load the length with `Acquire`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crossbeam_utils::CachePadded;
use rustc_hash::FxHashMap;

/// Dense symbol id, `0..capacity`.
pub(crate) type SymbolId = u32;

/// Read side: id → name, shared by every thread.
#[derive(Debug)]
pub struct SymbolTable {
    /// `names[i]` is set exactly once, by the writer, before `len > i` is published.
    names: Box<[OnceLock<Box<[u8]>>]>,
    /// Number of interned symbols. Written only by the interner (`Release`).
    len: CachePadded<AtomicUsize>,
}

impl SymbolTable {
    /// Number of symbols interned so far (ids `0..len` are valid).
    pub fn len(&self) -> usize {
        // Acquire pairs with the Release store in `SymbolInterner::intern`.
        self.len.load(Ordering::Acquire)
    }

    /// True before the first symbol is interned.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Maximum number of symbols.
    pub fn capacity(&self) -> usize {
        self.names.len()
    }

    /// The name of `id`, or `None` when `id` is not interned yet.
    pub fn name(&self, id: SymbolId) -> Option<&[u8]> {
        self.names.get(id as usize)?.get().map(|b| &**b)
    }
}

/// The symbol table is full: `capacity` symbols are interned already.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("symbol limit of {capacity} reached")]
pub struct SymbolLimitReached {
    /// The configured maximum.
    pub capacity: usize,
}

/// Write side: name → id. Owned by the feed thread (single writer).
#[derive(Debug)]
pub struct SymbolInterner {
    map: FxHashMap<Box<[u8]>, SymbolId>,
    table: Arc<SymbolTable>,
}

impl SymbolInterner {
    /// A new, empty table with room for `capacity` symbols, and its writer.
    ///
    /// # Panics
    /// If `capacity` is zero or does not fit a `u32`.
    pub fn new(capacity: usize) -> (SymbolInterner, Arc<SymbolTable>) {
        assert!(
            capacity > 0 && capacity <= u32::MAX as usize,
            "bad symbol capacity"
        );
        let table = Arc::new(SymbolTable {
            names: (0..capacity).map(|_| OnceLock::new()).collect(),
            len: CachePadded::new(AtomicUsize::new(0)),
        });
        let mut map = FxHashMap::default();
        map.reserve(capacity);
        (
            SymbolInterner {
                map,
                table: Arc::clone(&table),
            },
            table,
        )
    }

    /// The id of `name`, interning it when new.
    ///
    /// Allocates only for a new symbol; a known symbol is one hash lookup.
    ///
    /// # Errors
    /// [`SymbolLimitReached`] when `name` is new and the table is full.
    #[inline]
    pub fn intern(&mut self, name: &[u8]) -> Result<SymbolId, SymbolLimitReached> {
        if let Some(&id) = self.map.get(name) {
            return Ok(id);
        }
        let len = self.map.len();
        if len == self.table.capacity() {
            return Err(SymbolLimitReached {
                capacity: self.table.capacity(),
            });
        }
        let boxed: Box<[u8]> = name.into();
        let set = self.table.names[len].set(boxed.clone());
        debug_assert!(set.is_ok(), "single writer: slot {len} written twice");
        self.map.insert(boxed, len as SymbolId);
        // Release pairs with the Acquire in `SymbolTable::len`: the name is
        // visible before the id is.
        self.table.len.store(len + 1, Ordering::Release);
        Ok(len as SymbolId)
    }

    /// The id of `name` if it is interned already; never interns.
    #[inline]
    pub fn get(&self, name: &[u8]) -> Option<u32> {
        self.map.get(name).copied()
    }

    /// The shared read side.
    pub fn table(&self) -> &Arc<SymbolTable> {
        &self.table
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_ids_in_arrival_order() {
        let (mut w, t) = SymbolInterner::new(4);
        assert_eq!(w.intern(b"EURUSD"), Ok(0));
        assert_eq!(w.intern(b"GBPUSD"), Ok(1));
        assert_eq!(w.intern(b"EURUSD"), Ok(0));
        assert_eq!(t.len(), 2);
        assert_eq!(t.name(1), Some(&b"GBPUSD"[..]));
        assert_eq!(t.name(2), None);
    }

    #[test]
    fn capacity_is_a_value_not_a_panic() {
        let (mut w, t) = SymbolInterner::new(2);
        w.intern(b"A").unwrap();
        w.intern(b"B").unwrap();
        assert_eq!(w.intern(b"C"), Err(SymbolLimitReached { capacity: 2 }));
        assert_eq!(
            w.intern(b"A"),
            Ok(0),
            "known symbols still resolve when full"
        );
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn reader_on_another_thread_sees_names_of_published_ids() {
        let (mut w, t) = SymbolInterner::new(1000);
        let reader = std::thread::spawn(move || loop {
            let n = t.len();
            for id in 0..n {
                let name = t.name(id as SymbolId).expect("published id has a name");
                assert_eq!(name, format!("S{id}").as_bytes());
            }
            if n == 1000 {
                break;
            }
        });
        for i in 0..1000 {
            w.intern(format!("S{i}").as_bytes()).unwrap();
        }
        reader.join().unwrap();
    }
}
