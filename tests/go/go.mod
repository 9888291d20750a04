module paddock/tests/zkgo

go 1.19

require github.com/go-zookeeper/zk v1.0.4
