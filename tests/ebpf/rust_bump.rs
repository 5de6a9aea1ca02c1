// SPDX-License-Identifier: MIT
//
// A Rust program whose #[global_allocator] never calls malloc (bump_arena.rs), running
// workload.rs's workload: 100 MiB held at one site, hold_big, among churn whose frees reach
// the allocator's dealloc, which ignores them. The eBPF tests profile it and expect hold_big,
// demangled, as the top live site with about 100 MiB.

#[global_allocator]
static GLOBAL: bump_arena::Bump = bump_arena::Bump::new();

include!("workload.rs");

fn main() {
    workload_main();
}
