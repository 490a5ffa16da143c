package domain

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// sdkModule is the plugin contract's module: a type from its package, or
// from one under it, is the sdk's.
const sdkModule = "github.com/baton-run/baton/sdk"

// TestStoredTypesHoldNoSDKType: nothing the domain stores or projects (an
// event of every registered type, an effect of every kind, a client
// command, whose hash a receipt keeps, and the thread projection) holds a
// type of the sdk, however deep: the log's schema is the domain's own, so
// a change to the plugin contract cannot change what an old log means.
// The provider's terms cross at the edge (sdkconv.go) instead.
func TestStoredTypesHoldNoSDKType(t *testing.T) {
	roots := []reflect.Type{reflect.TypeFor[Thread]()}
	for _, typ := range EventTypes() {
		p, err := DecodePayload(typ, []byte("{}"))
		if err != nil {
			t.Fatal(err)
		}
		roots = append(roots, reflect.TypeOf(p))
	}
	for _, decode := range effectKinds {
		e, err := decode([]byte("{}"))
		if err != nil {
			t.Fatal(err)
		}
		roots = append(roots, reflect.TypeOf(e))
	}
	for _, decode := range clientCommands {
		c, err := decode([]byte("{}"))
		if err != nil {
			t.Fatal(err)
		}
		roots = append(roots, reflect.TypeOf(c))
	}
	seen := map[reflect.Type]bool{}
	for _, root := range roots {
		for _, field := range sdkFields(root, root.Name(), seen) {
			t.Errorf("%s: the log would store the sdk's schema; use the domain's own type (providerterms.go), converted in sdkconv.go", field)
		}
	}
}

// sdkFields names each field under typ (path names typ) whose type is the
// sdk's, walking fields, pointers, slices, arrays and maps; a type in seen
// was walked already.
func sdkFields(typ reflect.Type, path string, seen map[reflect.Type]bool) []string {
	if pkg := typ.PkgPath(); pkg == sdkModule || strings.HasPrefix(pkg, sdkModule+"/") {
		return []string{fmt.Sprintf("%s is %s", path, typ)}
	}
	if seen[typ] {
		return nil
	}
	seen[typ] = true
	switch typ.Kind() {
	case reflect.Pointer:
		return sdkFields(typ.Elem(), path, seen)
	case reflect.Slice, reflect.Array:
		return sdkFields(typ.Elem(), path+"[]", seen)
	case reflect.Map:
		return append(sdkFields(typ.Key(), path+"[key]", seen), sdkFields(typ.Elem(), path+"[]", seen)...)
	case reflect.Struct:
		var found []string
		for i := range typ.NumField() {
			f := typ.Field(i)
			found = append(found, sdkFields(f.Type, path+"."+f.Name, seen)...)
		}
		return found
	}
	return nil
}
