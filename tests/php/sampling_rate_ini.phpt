--TEST--
memprof.sampling_rate sets the rate (bytes, with K/M suffixes as memory_limit)
--SKIPIF--
<?php if (!extension_loaded("memprof")) die("skip the memprof extension is not loaded"); ?>
--INI--
memprof.sampling_rate=1M
--FILE--
<?php
memprof_enable();
var_dump(memprof_estimate()['sampling_rate']);
?>
--EXPECT--
int(1048576)
