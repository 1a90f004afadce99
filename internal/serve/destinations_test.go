package serve

import (
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/config"
)

// fill sets every string, bool, number, string slice and string-keyed map reachable from v to
// a value made from its path, so a conversion that drops a field shows up as a value missing.
func fill(v reflect.Value, path string) {
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), path)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			fill(v.Field(i), path+"."+v.Type().Field(i).Name)
		}
	case reflect.String:
		v.SetString(path)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int64:
		v.SetInt(int64(len(path)) * int64(time.Second))
	case reflect.Float64:
		v.SetFloat(float64(len(path)) + 0.5)
	case reflect.Map:
		if v.Type().Key().Kind() == reflect.String {
			e := reflect.New(v.Type().Elem()).Elem()
			fill(e, path+"[]")
			v.Set(reflect.MakeMap(v.Type()))
			v.SetMapIndex(reflect.ValueOf(path).Convert(v.Type().Key()), e)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.String {
			v.Set(reflect.ValueOf([]string{path}))
		}
	}
}

// values lists the leaves of v as strings, for comparing one struct's with another's.
func values(v reflect.Value) []string {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return values(v.Elem())
	case reflect.Struct:
		var out []string
		for i := 0; i < v.NumField(); i++ {
			out = append(out, values(v.Field(i))...)
		}
		return out
	case reflect.Slice:
		var out []string
		for i := 0; i < v.Len(); i++ {
			out = append(out, values(v.Index(i))...)
		}
		return out
	case reflect.String:
		return []string{v.String()}
	case reflect.Int64:
		return []string{time.Duration(v.Int()).String()}
	case reflect.Float64:
		return []string{strconv.FormatFloat(v.Float(), 'g', -1, 64)}
	case reflect.Map:
		var out []string
		for _, k := range v.MapKeys() {
			out = append(out, k.String())
			out = append(out, values(v.MapIndex(k))...)
		}
		return out
	case reflect.Bool:
		return []string{"bool " + strconv.FormatBool(v.Bool())}
	}
	return nil
}

func count(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

// Every setting of a broker sink's block reaches the options its package opens with: a field
// added to config.NATSSink, RabbitMQSink or KafkaSink and not converted fails here.
func TestBrokerSinkOptionsCarryEveryField(t *testing.T) {
	var sk config.Sink
	fill(reflect.ValueOf(&sk).Elem(), "sink")
	for kind, conv := range map[string]struct {
		block any
		opts  any
	}{
		config.KindNATS:     {sk.NATS, natsOptions(sk, time.Minute)},
		config.KindRabbitMQ: {sk.RabbitMQ, rabbitMQOptions(sk, time.Minute)},
		config.KindKafka:    {sk.Kafka, kafkaOptions(sk, time.Minute)},
	} {
		got := values(reflect.ValueOf(conv.opts))
		for _, want := range append(values(reflect.ValueOf(conv.block)), sk.Name, sk.Secret, time.Minute.String()) {
			if !slices.Contains(got, want) {
				t.Errorf("%s: the options lack %s", kind, want)
			}
		}
		if want, n := count(values(reflect.ValueOf(conv.block)), "bool true"), count(got, "bool true"); n != want {
			t.Errorf("%s: %d of the block's %d switches reach the options", kind, n, want)
		}
	}
}
