package storetest

import (
	"fmt"
	"reflect"
	"strings"
	"time"
)

var timeType = reflect.TypeOf(time.Time{})

// diff returns a description of the differences between want and got ("" when
// equal). time.Time values compare with Equal (instant, not location); other
// values compare like reflect.DeepEqual, so nil and empty slices and maps
// differ.
func diff(want, got any) string {
	var out []string
	diffValue(&out, "", reflect.ValueOf(want), reflect.ValueOf(got))
	return strings.Join(out, "\n")
}

func diffValue(out *[]string, path string, w, g reflect.Value) {
	if !w.IsValid() || !g.IsValid() {
		if w.IsValid() != g.IsValid() {
			*out = append(*out, fmt.Sprintf("%s: want %v, got %v", path, w, g))
		}
		return
	}
	if w.Type() != g.Type() {
		*out = append(*out, fmt.Sprintf("%s: type %s vs %s", path, w.Type(), g.Type()))
		return
	}
	if w.Type() == timeType {
		wt, gt := w.Interface().(time.Time), g.Interface().(time.Time)
		if !wt.Equal(gt) {
			*out = append(*out, fmt.Sprintf("%s: want %s, got %s", path, wt.Format(time.RFC3339Nano), gt.Format(time.RFC3339Nano)))
		}
		return
	}
	switch w.Kind() {
	case reflect.Pointer, reflect.Interface:
		if w.IsNil() || g.IsNil() {
			if w.IsNil() != g.IsNil() {
				*out = append(*out, fmt.Sprintf("%s: want %s, got %s", path, show(w), show(g)))
			}
			return
		}
		diffValue(out, path, w.Elem(), g.Elem())
	case reflect.Struct:
		for i := 0; i < w.NumField(); i++ {
			diffValue(out, path+"."+w.Type().Field(i).Name, w.Field(i), g.Field(i))
		}
	case reflect.Slice:
		if w.IsNil() != g.IsNil() {
			*out = append(*out, fmt.Sprintf("%s: want %s, got %s (nil vs empty)", path, show(w), show(g)))
			return
		}
		if w.Type().Elem().Kind() == reflect.Uint8 {
			if string(w.Bytes()) != string(g.Bytes()) {
				*out = append(*out, fmt.Sprintf("%s: want %q, got %q", path, w.Bytes(), g.Bytes()))
			}
			return
		}
		if w.Len() != g.Len() {
			*out = append(*out, fmt.Sprintf("%s: want len %d %s, got len %d %s", path, w.Len(), show(w), g.Len(), show(g)))
			return
		}
		for i := 0; i < w.Len(); i++ {
			diffValue(out, fmt.Sprintf("%s[%d]", path, i), w.Index(i), g.Index(i))
		}
	case reflect.Map:
		if w.IsNil() != g.IsNil() || w.Len() != g.Len() {
			*out = append(*out, fmt.Sprintf("%s: want %s, got %s", path, show(w), show(g)))
			return
		}
		for _, k := range w.MapKeys() {
			gv := g.MapIndex(k)
			if !gv.IsValid() {
				*out = append(*out, fmt.Sprintf("%s[%v]: missing", path, k))
				continue
			}
			diffValue(out, fmt.Sprintf("%s[%v]", path, k), w.MapIndex(k), gv)
		}
	default:
		if !reflect.DeepEqual(w.Interface(), g.Interface()) {
			*out = append(*out, fmt.Sprintf("%s: want %#v, got %#v", path, w.Interface(), g.Interface()))
		}
	}
}

func show(v reflect.Value) string {
	if (v.Kind() == reflect.Pointer || v.Kind() == reflect.Slice || v.Kind() == reflect.Map || v.Kind() == reflect.Interface) && v.IsNil() {
		return "nil"
	}
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Type() == timeType {
		return v.Interface().(time.Time).Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("%#v", v.Interface())
}
