// SPDX-License-Identifier: MIT
//
// C++ frames are demangled: a namespaced member function that allocates with operator new
// shows as "shapes::Canvas::grow(unsigned long)" in the snapshot's frames, not as its
// mangled symbol. Self-checking; run under the preload plugin.
#include <cstdio>
#include <cstring>
#include <vector>

#include <memprof/memprof.h>

namespace shapes {
class Canvas {
  public:
    __attribute__((noinline)) void grow(unsigned long n)
    {
        blocks_.push_back(new char[n]);
        std::memset(blocks_.back(), 1, n);
        __asm__ volatile("" ::: "memory");
    }
    ~Canvas()
    {
        for (char *b : blocks_)
            delete[] b;
    }

  private:
    std::vector<char *> blocks_;
};
} // namespace shapes

int main()
{
    memprof_stats st = {};
    st.size = sizeof st;
    if (memprof_get_stats(&st) != 0 || st.state != MEMPROF_STATE_ACTIVE)
        return 77;
    shapes::Canvas canvas;
    for (int i = 0; i < 300; i++)
        canvas.grow(100000);
    memprof_snapshot *s = nullptr;
    if (memprof_get_snapshot(&s) != 0)
        return 1;
    bool found = false;
    for (size_t i = 0; i < memprof_snapshot_site_count(s) && !found; i++) {
        memprof_site_info si = {};
        si.size = sizeof si;
        memprof_snapshot_site(s, i, &si);
        int depth = memprof_snapshot_stack_depth(s, si.stack_id);
        for (int d = 0; d < depth; d++) {
            memprof_frame f = {};
            f.size = sizeof f;
            memprof_snapshot_frame(s, si.stack_id, (size_t)d, &f);
            if (f.function && std::strcmp(f.function, "shapes::Canvas::grow(unsigned long)") == 0) {
                std::printf("found %s at %s:%u\n", f.function, f.file ? f.file : "?", f.line);
                found = true;
            }
        }
    }
    memprof_free_snapshot(s);
    if (!found)
        std::fprintf(stderr, "no demangled shapes::Canvas::grow(unsigned long) frame\n");
    return found ? 0 : 1;
}
