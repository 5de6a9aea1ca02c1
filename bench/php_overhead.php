<?php
// SPDX-License-Identifier: MIT
//
// The allocation-heavy PHP workload of bench/php_overhead.py: strings, arrays and objects
// of mixed sizes built, transformed and dropped, with a working set of some tens of MB (the
// churn of a web request or a batch job). Runs a warm-up, then the workload, and prints the
// process CPU time the workload took, in seconds (getrusage: the profiler's cost is CPU
// work, and CPU time is less disturbed than wall time by other jobs on a shared machine).
//
//   php [-d extension=.../memprof.so] bench/php_overhead.php [ITERATIONS]

final class Row
{
    public function __construct(public string $key, public array $values, public int $size)
    {
    }
}

function workload(int $rounds): int
{
    $keep = [];
    for ($round = 0; $round < $rounds; $round++) {
        $words = [];
        for ($i = 0; $i < 20000; $i++) {
            $words[] = str_repeat("w{$i}-{$round}", 1 + $i % 7);
        }
        $counts = [];
        foreach ($words as $w) {
            $k = substr($w, 0, 6);
            $counts[$k] = ($counts[$k] ?? 0) + strlen($w);
        }
        $parts = array_map('strtoupper', explode(' ', implode(' ', $words)));
        sort($parts);
        $rows = [];
        foreach (array_chunk($parts, 8) as $chunk) {
            $rows[] = new Row($chunk[0], $chunk, array_sum(array_map('strlen', $chunk)));
        }
        $big = str_repeat('x', 100000 + ($round % 10) * 50000);
        $keep[] = [array_slice($rows, -500), $big, count($counts)];
        if (count($keep) > 20) {
            array_shift($keep);
        }
    }
    return count($keep);
}

function cpu_seconds(): float
{
    $u = getrusage();
    return $u['ru_utime.tv_sec'] + $u['ru_utime.tv_usec'] / 1e6
        + $u['ru_stime.tv_sec'] + $u['ru_stime.tv_usec'] / 1e6;
}

$iterations = (int)($argv[1] ?? 20);
workload(3); // warm-up: the heap grown, the functions' caches filled
$t0 = cpu_seconds();
workload($iterations);
$t1 = cpu_seconds();
printf("%.6f\n", $t1 - $t0);
