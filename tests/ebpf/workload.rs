// SPDX-License-Identifier: MIT
//
// The workload of the Rust programs of the eBPF tests (own_alloc.rs, rust_bump.rs), included
// into each with include!(): each program must be its own crate (own_alloc.rs's allocator is
// inlined into this code), and the tests find these functions under the crate's name
// (own_alloc::hold_big, rust_bump::hold_big).
//
// It holds 100 MiB allocated at one site (hold_big: 400 blocks of 256 KiB through
// std::alloc::alloc) among churn: vectors and boxes allocated and dropped (churn). With the
// argument "wait" the program prints "ready" and waits for a line on stdin before allocating,
// and "done" and waits for another line before exiting (the attach tests).

const BIG_BLOCK: usize = 256 << 10;
const BIG_BLOCKS: usize = 400; // 100 MiB

#[inline(never)]
fn hold_big(keep: &mut Vec<*mut u8>) {
    let layout = std::alloc::Layout::from_size_align(BIG_BLOCK, 16).unwrap();
    for _ in 0..BIG_BLOCKS {
        let p = unsafe { std::alloc::alloc(layout) };
        assert!(!p.is_null());
        unsafe { p.write(1) };
        keep.push(p);
    }
}

#[inline(never)]
fn churn(rounds: usize) -> usize {
    let mut sum = 0usize;
    let mut x: usize = 12345;
    for _ in 0..rounds {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let n = 16 + (x >> 33) % 4096;
        let v: Vec<u8> = vec![7u8; n];
        sum = sum.wrapping_add(v[n - 1] as usize);
        let b = Box::new([x; 4]);
        sum = sum.wrapping_add(b[3] & 1);
    }
    sum
}

// Churn, 100 MiB held at hold_big, churn; the blocks stay allocated.
fn work() -> Vec<*mut u8> {
    let mut keep = Vec::with_capacity(BIG_BLOCKS);
    let s1 = churn(20000);
    hold_big(&mut keep);
    let s2 = churn(20000);
    println!("held {} blocks, churn {}", keep.len(), s1.wrapping_add(s2) & 1);
    keep
}

#[cfg(not(lib))]
fn wait_for_line() {
    use std::io::BufRead;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).unwrap();
}

// The program's main(): work(), between the two waits when its argument is "wait".
#[cfg(not(lib))]
fn workload_main() {
    let wait = std::env::args().nth(1).as_deref() == Some("wait");
    if wait {
        println!("ready");
        std::io::Write::flush(&mut std::io::stdout()).unwrap();
        wait_for_line();
    }
    let _keep = work();
    if wait {
        println!("done");
        std::io::Write::flush(&mut std::io::stdout()).unwrap();
        wait_for_line();
    }
}
