module ferry.bench/gopeer

go 1.19
