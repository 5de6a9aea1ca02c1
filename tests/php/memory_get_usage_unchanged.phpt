--TEST--
While profiling, memory_get_usage() still counts the request's heap (the hooks forward to the same heap)
--SKIPIF--
<?php if (!extension_loaded("memprof")) die("skip the memprof extension is not loaded"); ?>
--FILE--
<?php
memprof_enable();
$before = memory_get_usage();
$s = str_repeat('m', 10 << 20);
$grew = memory_get_usage() - $before;
var_dump($grew >= (10 << 20) && $grew < (11 << 20));
?>
--EXPECT--
bool(true)
