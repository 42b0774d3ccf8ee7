//! The guest's allocator: the C library's `malloc` while the module is pre-initialised, then a
//! fresh heap of its own for the run.
//!
//! Every run starts from the memory image captured after `cm_init`. Had the run kept allocating
//! from the pre-initialisation heap, `malloc` would reuse the free chunks scattered through the
//! image and write to their neighbours' free lists, and each page it touched would become a
//! private copy for that instance. A run's allocations instead come from a heap that starts
//! empty above the image, on pages no instance shares, so they fill fresh pages in order, and
//! the image's pages stay shared unless the program writes to a value built before the run.
//!
//! Blocks allocated before the switch are never given back during a run (a resize copies them):
//! freeing one would write to the image's pages for no gain, since an instance is thrown away
//! when its run ends. What a run leaks that way is bounded by the image's heap.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::{Cell, UnsafeCell};

use dlmalloc::Dlmalloc;

/// The heap in force, and from where the run's heap begins.
struct State {
    /// Where the run's heap begins; `usize::MAX` until the switch. Every block this allocator
    /// made before the switch lies below it. The C library's `malloc` may grow memory above it
    /// during the run too, but its blocks never come back through this allocator.
    run_from: usize,
    run: Dlmalloc<RunPages>,
}

pub struct Heap {
    state: UnsafeCell<State>,
}

// SAFETY: wasm32-wasip1 has no threads, so the state is never reached from two threads at once;
// and no allocator entry point calls another, so no `&mut State` made below ever overlaps
// another. (dlmalloc's own checks panic, and a panic may allocate, only on a layout that breaks
// `GlobalAlloc`'s contract, which is undefined behaviour already.)
unsafe impl Sync for Heap {}

#[global_allocator]
static HEAP: Heap = Heap {
    state: UnsafeCell::new(State {
        run_from: usize::MAX,
        run: run_heap(),
    }),
};

const WASM_PAGE: usize = 64 * 1024;

/// What the run's heap takes from `RunPages` at a time. dlmalloc writes a fencepost at the end of
/// what it has taken, so taking a host page at a time keeps that write on a page next to the
/// ones in use. Each further dirty page apart from the others costs the slot's reset a region of
/// its scan, and a scan that runs out of regions gives the rest of memory back to the kernel,
/// to be faulted in again by the next run.
const GRANULARITY: usize = 4096;

const fn run_heap() -> Dlmalloc<RunPages> {
    let mut heap = Dlmalloc::new_with_allocator(RunPages {
        next: Cell::new(0),
        end: Cell::new(0),
    });
    assert!(heap.set_granularity(GRANULARITY));
    // Nothing is ever given back to `RunPages`, so the periodic search for memory to release
    // would only cost time.
    heap.set_max_release_check_rate(0);
    heap
}

/// Memory grown for the run's heap at the switch, so that it is part of the snapshot's initial
/// memory: a run whose heap stays within it never grows memory, which would cost it an
/// `mprotect` to open the pages and its slot another to close them before the next run.
const SET_ASIDE_PAGES: usize = 16;

/// Allocations from now on come from the run's heap, which begins at the memory's current end.
/// Called once, at the end of pre-initialisation; later calls do nothing.
pub fn start_run_heap() {
    // SAFETY: see `Sync` above; nothing else holds the state while this runs.
    let state = unsafe { &mut *HEAP.state.get() };
    if state.running() {
        return;
    }
    let start = core::arch::wasm32::memory_size(0);
    // Without the set-aside pages, the heap grows memory from its first allocation.
    let set_aside = if core::arch::wasm32::memory_grow(0, SET_ASIDE_PAGES) == usize::MAX {
        0
    } else {
        SET_ASIDE_PAGES
    };
    let pages = state.run.allocator();
    pages.next.set(address_of_page(start));
    pages.end.set(address_of_page(start + set_aside));
    state.run_from = pages.next.get();
}

/// The address where wasm page `page` begins. Memory that reaches the top of the address space
/// would end at address 0, which no Rust allocation may contain: its end is taken a granule
/// short of the top instead.
fn address_of_page(page: usize) -> usize {
    page.checked_mul(WASM_PAGE)
        .unwrap_or(usize::MAX - (GRANULARITY - 1))
}

/// The memory the run's heap takes from, in pieces of `GRANULARITY`: the pages set aside at the
/// switch, then pages grown on demand. `[next, end)` is grown but not yet handed out. Nothing is
/// ever given back; the instance ends with its run.
struct RunPages {
    next: Cell<usize>,
    end: Cell<usize>,
}

impl RunPages {
    /// Grows memory so that `[next, end)` holds `size` bytes. Memory grown by someone else since
    /// (the C library's `malloc`) leaves a gap: the pages before it are then abandoned.
    fn extend(&self, size: usize) -> bool {
        let memory_end = address_of_page(core::arch::wasm32::memory_size(0));
        let contiguous = memory_end == self.end.get();
        let short = if contiguous {
            size - (self.end.get() - self.next.get())
        } else {
            size
        };
        let pages = short.div_ceil(WASM_PAGE);
        let previous = core::arch::wasm32::memory_grow(0, pages);
        if previous == usize::MAX {
            return false;
        }
        if !contiguous {
            self.next.set(address_of_page(previous));
        }
        self.end.set(address_of_page(previous + pages));
        self.end.get() - self.next.get() >= size
    }
}

// SAFETY: `alloc` hands out memory no one else uses (grown and never handed out before), of the
// size asked for, zeroed (fresh wasm pages are, and the set-aside pages are untouched in the
// snapshot); every other method declines.
unsafe impl dlmalloc::Allocator for RunPages {
    fn alloc(&self, size: usize) -> (*mut u8, usize, u32) {
        if self.end.get() - self.next.get() < size && !self.extend(size) {
            return (std::ptr::null_mut(), 0, 0);
        }
        let start = self.next.get();
        self.next.set(start + size);
        (start as *mut u8, size, 0)
    }

    fn remap(&self, _: *mut u8, _: usize, _: usize, _: bool) -> *mut u8 {
        std::ptr::null_mut()
    }

    fn free_part(&self, _: *mut u8, _: usize, _: usize) -> bool {
        false
    }

    fn free(&self, _: *mut u8, _: usize) -> bool {
        false
    }

    fn can_release_part(&self, _: u32) -> bool {
        false
    }

    fn allocates_zeros(&self) -> bool {
        true
    }

    fn page_size(&self) -> usize {
        GRANULARITY
    }
}

impl Heap {
    /// # Safety
    /// No other reference to the state may be alive (see `Sync` above).
    unsafe fn state(&self) -> &mut State {
        &mut *self.state.get()
    }
}

impl State {
    fn running(&self) -> bool {
        self.run_from != usize::MAX
    }

    /// Whether `ptr` came from the run's heap: its memory is all grown after the switch, and
    /// nothing allocated before it lies at or above `run_from`.
    fn from_run_heap(&self, ptr: *mut u8) -> bool {
        ptr as usize >= self.run_from
    }
}

// SAFETY: each entry point forwards to an allocator that upholds `GlobalAlloc`'s contract, with
// the pointer's own allocator chosen by `from_run_heap`: a block is only ever freed or resized
// by the allocator that made it, or (made before the switch) copied and left alone.
unsafe impl GlobalAlloc for Heap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let state = self.state();
        if state.running() {
            state.run.malloc(layout.size(), layout.align())
        } else {
            System.alloc(layout)
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let state = self.state();
        if state.running() {
            state.run.calloc(layout.size(), layout.align())
        } else {
            System.alloc_zeroed(layout)
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let state = self.state();
        if state.from_run_heap(ptr) {
            state.run.free(ptr, layout.size(), layout.align());
        } else if !state.running() {
            System.dealloc(ptr, layout);
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let state = self.state();
        if state.from_run_heap(ptr) {
            return state
                .run
                .realloc(ptr, layout.size(), layout.align(), new_size);
        }
        if !state.running() {
            return System.realloc(ptr, layout, new_size);
        }
        let moved = state.run.malloc(new_size, layout.align());
        if !moved.is_null() {
            std::ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size));
        }
        moved
    }
}
