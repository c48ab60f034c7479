module example.com/jsonapi

go 1.24
