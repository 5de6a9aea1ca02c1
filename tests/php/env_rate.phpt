--TEST--
MEMPROF_RATE sets the rate of MEMPROF_PHP=1 (bytes, K/M suffixes); a bad value is one line on stderr and the ini rate is kept
--SKIPIF--
<?php if (!extension_loaded("memprof")) die("skip the memprof extension is not loaded"); ?>
<?php if (!getenv("MEMPROF_PHP_EXT")) die("skip MEMPROF_PHP_EXT (the extension's path) is not set"); ?>
--FILE--
<?php
$script = __DIR__ . '/env_rate.child.php';
file_put_contents($script, '<?php echo memprof_estimate()["sampling_rate"], "\n";');
foreach (['64K', '2M', 'lots'] as $rate) {
    $cmd = sprintf('MEMPROF_PHP=1 MEMPROF_RATE=%s MEMPROF_OUTPUT=/dev/null %s -n -d extension=%s %s 2>&1',
                   $rate, escapeshellarg(PHP_BINARY), escapeshellarg(getenv('MEMPROF_PHP_EXT')),
                   escapeshellarg($script));
    echo "$rate: ", shell_exec($cmd);
}
unlink($script);
?>
--EXPECT--
64K: 65536
2M: 2097152
lots: memprof: MEMPROF_RATE=lots is not a rate in bytes (512K, 1M, ...)
524288
