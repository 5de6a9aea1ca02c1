--TEST--
memprof_enable(), memprof_disable() and memprof_enabled() switch sampling on and off
--SKIPIF--
<?php if (!extension_loaded("memprof")) die("skip the memprof extension is not loaded"); ?>
--FILE--
<?php
var_dump(memprof_enabled());
var_dump(memprof_enable());
var_dump(memprof_enabled());
var_dump(memprof_enable()); // again: still on, no error
var_dump(memprof_disable());
var_dump(memprof_enabled());
var_dump(memprof_enable());
var_dump(memprof_enabled());
?>
--EXPECT--
bool(false)
bool(true)
bool(true)
bool(true)
bool(true)
bool(false)
bool(true)
bool(true)
