--TEST--
MEMPROF_PHP=1 without MEMPROF_OUTPUT prints the text profile on standard error at the end
--SKIPIF--
<?php if (!extension_loaded("memprof")) die("skip the memprof extension is not loaded"); ?>
<?php if (!getenv("MEMPROF_PHP_EXT")) die("skip MEMPROF_PHP_EXT (the extension's path) is not set"); ?>
--FILE--
<?php
$script = __DIR__ . '/env_stderr_text.child.php';
file_put_contents($script, '<?php
function env_hold() {
    $a = [];
    for ($i = 0; $i < 16; $i++) {
        $a[] = str_repeat("e", 4 << 20);
    }
    return $a;
}
$kept = env_hold();
');
$cmd = sprintf('MEMPROF_PHP=1 %s -n -d extension=%s %s 2>&1 >/dev/null',
               escapeshellarg(PHP_BINARY), escapeshellarg(getenv('MEMPROF_PHP_EXT')),
               escapeshellarg($script));
$err = shell_exec($cmd);
var_dump(str_starts_with($err, 'libmemprof'));
var_dump(strpos($err, 'Top sites') !== false);
var_dump(strpos($err, 'env_hold (' . $script . ':5)') !== false);
unlink($script);
?>
--EXPECT--
bool(true)
bool(true)
bool(true)
