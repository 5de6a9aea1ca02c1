--TEST--
An unknown format or a limit below 1 is a ValueError
--SKIPIF--
<?php if (!extension_loaded("memprof")) die("skip the memprof extension is not loaded"); ?>
--FILE--
<?php
memprof_enable();
$f = fopen('php://memory', 'w+');
foreach ([fn() => memprof_dump($f, 'xml'), fn() => memprof_dump_file('x.txt', 'png'),
          fn() => memprof_top_sites(0), fn() => memprof_dump_file('')] as $call) {
    try {
        $call();
        echo "no error\n";
    } catch (ValueError $e) {
        echo get_class($e), ': ', $e->getMessage(), "\n";
    }
}
?>
--EXPECT--
ValueError: memprof_dump(): Argument #2 ($format) must be one of "pprof", "speedscope", "collapsed", "text" or "html"
ValueError: memprof_dump_file(): Argument #2 ($format) must be one of "pprof", "speedscope", "collapsed", "text", "html" or null
ValueError: memprof_top_sites(): Argument #1 ($limit) must be greater than 0
ValueError: memprof_dump_file(): Argument #1 ($path) cannot be empty
