package localcluster

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/duration"
	restclient "k8s.io/client-go/rest"
)

// GetTable asks the API server for the table `kubectl get` prints for the
// collection at path (for example /apis/autoscaling.x-k8s.io/v1beta1/capacityquotas),
// printer columns included.
func GetTable(ctx context.Context, config *restclient.Config, path string) (*metav1.Table, error) {
	scheme := runtime.NewScheme()
	metav1.AddMetaToScheme(scheme)
	cfg := restclient.CopyConfig(config)
	cfg.GroupVersion = &schema.GroupVersion{Version: "v1"}
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	client, err := restclient.UnversionedRESTClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("table client: %w", err)
	}
	table := &metav1.Table{}
	err = client.Get().AbsPath(path).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").
		Do(ctx).Into(table)
	if err != nil {
		return nil, fmt.Errorf("getting the table of %s: %w", path, err)
	}
	return table, nil
}

// PrintTable writes a table the way kubectl get does: upper-case headers, the
// columns of priority 0, ages relative to now.
func PrintTable(w io.Writer, table *metav1.Table, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	var cols []int
	var headers []string
	for i, c := range table.ColumnDefinitions {
		if c.Priority != 0 {
			continue
		}
		cols = append(cols, i)
		headers = append(headers, strings.ToUpper(c.Name))
	}
	fmt.Fprintln(tw, strings.Join(headers, "\t"))
	for _, row := range table.Rows {
		cells := make([]string, 0, len(cols))
		for _, i := range cols {
			cells = append(cells, cellText(table.ColumnDefinitions[i], row.Cells[i], now))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

func cellText(def metav1.TableColumnDefinition, cell any, now time.Time) string {
	if cell == nil {
		return ""
	}
	s := fmt.Sprint(cell)
	if def.Type == "date" {
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			return duration.HumanDuration(now.Sub(t))
		}
	}
	return s
}
