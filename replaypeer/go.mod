module github.com/baton-run/baton/replaypeer

go 1.26.8

require github.com/baton-run/baton/sdk v1.0.0

replace github.com/baton-run/baton/sdk => ../sdk

require github.com/google/go-cmp v0.7.0
