module example.com/greeter

go 1.22

require example.com/strutil v1.0.0
