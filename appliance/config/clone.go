package config

import "reflect"

// Clone returns a deep copy (nil for nil): no slice, map or pointer is
// shared with d.
func (d *Document) Clone() *Document {
	if d == nil {
		return nil
	}
	c := new(Document)
	deepCopy(reflect.ValueOf(c).Elem(), reflect.ValueOf(d).Elem())
	return c
}

// deepCopy copies src into the settable dst, allocating new slices, maps and
// pointees, so that a field added to the document later is cloned too. The
// document holds only exported fields of plain kinds.
func deepCopy(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Struct:
		for i := range src.NumField() {
			deepCopy(dst.Field(i), src.Field(i))
		}
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		s := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
		for i := range src.Len() {
			deepCopy(s.Index(i), src.Index(i))
		}
		dst.Set(s)
	case reflect.Map:
		if src.IsNil() {
			return
		}
		m := reflect.MakeMapWithSize(src.Type(), src.Len())
		it := src.MapRange()
		for it.Next() {
			v := reflect.New(src.Type().Elem()).Elem()
			deepCopy(v, it.Value())
			m.SetMapIndex(it.Key(), v)
		}
		dst.Set(m)
	case reflect.Pointer:
		if src.IsNil() {
			return
		}
		p := reflect.New(src.Type().Elem())
		deepCopy(p.Elem(), src.Elem())
		dst.Set(p)
	default:
		dst.Set(src)
	}
}

// isEmpty reports whether v is the zero value, counting empty slices and
// maps as zero (JSON "[]" and "{}" set nothing).
func isEmpty(v any) bool { return emptyValue(reflect.ValueOf(v)) }

func emptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if !emptyValue(v.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Slice, reflect.Map:
		return v.Len() == 0
	default:
		return v.IsZero()
	}
}
