{"id":"t1","url":"http://127.0.0.1:1/doc/t0","endpoint":"doc"}
{"id":"t2","url":"http://127.0.0.1:2/doc/t0","endpoint":"doc"}
{"id":"t3","url":"http://127.0.0.1:3/doc/t0","endpoint":"doc"}
{"id":"t4","url":"http://127.0.0.1:4/doc/t0","endpoint":"doc"}
