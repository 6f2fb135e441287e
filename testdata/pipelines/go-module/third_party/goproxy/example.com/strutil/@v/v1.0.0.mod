module example.com/strutil

go 1.22
