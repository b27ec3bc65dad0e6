package localcluster

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/quotascale/quotascale/cloudprovider/kwok"
)

// localcluster's Cluster API infrastructure provider: machines are kwok nodes.
// It follows Cluster API's infrastructure contract (v1beta2): the CRDs carry
// the contract label, a machine reports spec.providerID and
// status.initialization.provisioned, and a machine template reports
// status.capacity and status.nodeInfo for autoscaling from zero.
const (
	InfrastructureGroup     = "infrastructure.cluster.x-k8s.io"
	InfrastructureVersion   = "v1alpha1"
	KwokMachineKind         = "KwokMachine"
	KwokMachineTemplateKind = "KwokMachineTemplate"
	KwokMachinePoolKind     = "KwokMachinePool"
)

var (
	kwokMachineGVK         = schema.GroupVersionKind{Group: InfrastructureGroup, Version: InfrastructureVersion, Kind: KwokMachineKind}
	kwokMachineTemplateGVK = schema.GroupVersionKind{Group: InfrastructureGroup, Version: InfrastructureVersion, Kind: KwokMachineTemplateKind}
	kwokMachinePoolGVK     = schema.GroupVersionKind{Group: InfrastructureGroup, Version: InfrastructureVersion, Kind: KwokMachinePoolKind}
	// KwokMachineTemplates is the resource of KwokMachineTemplateKind.
	KwokMachineTemplates = schema.GroupVersionResource{Group: InfrastructureGroup, Version: InfrastructureVersion, Resource: "kwokmachinetemplates"}
	// KwokMachinePools is the resource of KwokMachinePoolKind.
	KwokMachinePools = schema.GroupVersionResource{Group: InfrastructureGroup, Version: InfrastructureVersion, Resource: "kwokmachinepools"}
	// KwokMachines is the resource of KwokMachineKind.
	KwokMachines = schema.GroupVersionResource{Group: InfrastructureGroup, Version: InfrastructureVersion, Resource: "kwokmachines"}
)

// KwokMachineSpec is one machine: the node its kubelet registers, and how the
// infrastructure behaves while it provisions.
type KwokMachineSpec struct {
	// ProviderID is set by the provider when the machine is provisioned.
	ProviderID string `json:"providerID,omitempty"`
	// Node is what the machine registers as.
	Node KwokNodeSpec `json:"node"`
	// ProvisioningDelay is how long the machine takes, from its creation, to
	// provision and register, as a Go duration; empty means at once.
	ProvisioningDelay string `json:"provisioningDelay,omitempty"`
	// Failure makes provisioning fail instead.
	Failure *KwokFailure `json:"failure,omitempty"`
}

// KwokNodeSpec is a node as its kubelet would register it (--node-labels,
// --register-with-taints, the machine's resources).
type KwokNodeSpec struct {
	Labels map[string]string `json:"labels,omitempty"`
	Taints []corev1.Taint    `json:"taints,omitempty"`
	// Capacity needs cpu and memory; pods defaults to 110.
	Capacity corev1.ResourceList `json:"capacity"`
	// Allocatable defaults to Capacity, resource by resource.
	Allocatable corev1.ResourceList `json:"allocatable,omitempty"`
	// Devices are the node's DRA devices, which localcluster's kwok DRA
	// driver publishes once the node has registered.
	Devices []kwok.DevicePoolConfig `json:"devices,omitempty"`
}

// KwokFailure is a provisioning failure, reported through the contract's
// status.failureReason and status.failureMessage, which Cluster API copies to
// the Machine.
type KwokFailure struct {
	// OutOfResources reports InsufficientResourcesMachineError (a stockout or an
	// exhausted cloud quota) instead of CreateMachineError.
	OutOfResources bool `json:"outOfResources,omitempty"`
	// Code and Message make up the failure message, "Code: Message".
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	// FailAfter lets machines of the same template provision while fewer than
	// FailAfter of them are provisioned: a stockout after a few machines.
	FailAfter *int `json:"failAfter,omitempty"`
}

// Cluster API's machine error reasons (sigs.k8s.io/cluster-api/errors) that the
// provider reports.
const (
	InsufficientResourcesMachineError = "InsufficientResourcesMachineError"
	CreateMachineError                = "CreateMachineError"
)

type kwokMachineStatus struct {
	Initialization *machineInitialization `json:"initialization,omitempty"`
	FailureReason  string                 `json:"failureReason,omitempty"`
	FailureMessage string                 `json:"failureMessage,omitempty"`
	Conditions     []metav1.Condition     `json:"conditions,omitempty"`
}

type machineInitialization struct {
	Provisioned *bool `json:"provisioned,omitempty"`
}

type kwokMachine struct {
	Spec   KwokMachineSpec   `json:"spec"`
	Status kwokMachineStatus `json:"status"`
}

type kwokMachineTemplate struct {
	Spec struct {
		Template struct {
			Spec KwokMachineSpec `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
	Status kwokMachineTemplateStatus `json:"status"`
}

// kwokMachinePool is an infrastructure machine pool: its instances are kwok
// nodes, listed in spec.providerIDList as Cluster API's MachinePool contract
// has it, with status.ready, status.replicas and, for autoscaling from zero,
// status.capacity.
type kwokMachinePool struct {
	Spec struct {
		KwokMachineSpec `json:",inline"`
		ProviderIDList  []string `json:"providerIDList,omitempty"`
	} `json:"spec"`
	Status kwokMachinePoolStatus `json:"status"`
}

type kwokMachinePoolStatus struct {
	Ready                     bool  `json:"ready,omitempty"`
	Replicas                  int32 `json:"replicas,omitempty"`
	kwokMachineTemplateStatus `json:",inline"`
	// Instances are the pool's machines; an instance gets its provider ID
	// when it has registered its node.
	Instances []poolInstance `json:"instances,omitempty"`
}

type poolInstance struct {
	Name       string      `json:"name"`
	Created    metav1.Time `json:"created"`
	ProviderID string      `json:"providerID,omitempty"`
}

type kwokMachineTemplateStatus struct {
	Capacity corev1.ResourceList `json:"capacity,omitempty"`
	NodeInfo *nodeInfo           `json:"nodeInfo,omitempty"`
}

type nodeInfo struct {
	Architecture    string `json:"architecture,omitempty"`
	OperatingSystem string `json:"operatingSystem,omitempty"`
}

// kwokInfraCRDs are the provider's CRDs, labelled with the contract version
// they implement so that Cluster API finds their API version.
func kwokInfraCRDs() ([][]byte, error) {
	machineSpec := machineSpecSchema()
	conditions := apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{
		Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Required: []string{"type", "status", "reason", "lastTransitionTime"},
			Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"type": {Type: "string"}, "status": {Type: "string"}, "reason": {Type: "string"}, "message": {Type: "string"},
				"observedGeneration": {Type: "integer", Format: "int64"}, "lastTransitionTime": {Type: "string", Format: "date-time"},
			}}}}
	machine := crd("kwokmachines", KwokMachineKind, apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec": machineSpec,
			"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"initialization": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"provisioned": {Type: "boolean"}}},
				"failureReason":  {Type: "string"},
				"failureMessage": {Type: "string"},
				"conditions":     conditions,
			}},
		},
	})
	template := crd("kwokmachinetemplates", KwokMachineTemplateKind, apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec": {Type: "object", Required: []string{"template"}, Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"template": {Type: "object", Required: []string{"spec"}, Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"metadata": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"labels": stringMap(), "annotations": stringMap(),
					}},
					"spec": machineSpec,
				}},
			}},
			"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"capacity": quantityMap(),
				"nodeInfo": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"architecture": {Type: "string"}, "operatingSystem": {Type: "string"},
				}},
			}},
		},
	})
	poolSpec := machineSpecSchema()
	poolSpec.Properties["providerIDList"] = apiextensionsv1.JSONSchemaProps{Type: "array",
		Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}}
	pool := crd("kwokmachinepools", KwokMachinePoolKind, apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec": poolSpec,
			"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"ready":    {Type: "boolean"},
				"replicas": {Type: "integer", Format: "int32"},
				"capacity": quantityMap(),
				"nodeInfo": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"architecture": {Type: "string"}, "operatingSystem": {Type: "string"},
				}},
				"instances": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Required: []string{"name", "created"},
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"name": {Type: "string"}, "created": {Type: "string", Format: "date-time"}, "providerID": {Type: "string"},
					},
				}}},
			}},
		},
	})
	out := make([][]byte, 0, 3)
	for _, c := range []*apiextensionsv1.CustomResourceDefinition{machine, template, pool} {
		raw, err := json.Marshal(c)
		if err != nil {
			return nil, fmt.Errorf("encoding CRD %s: %w", c.Name, err)
		}
		out = append(out, raw)
	}
	return out, nil
}

func crd(plural, kind string, schema apiextensionsv1.JSONSchemaProps) *apiextensionsv1.CustomResourceDefinition {
	schema.Properties["apiVersion"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	schema.Properties["kind"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	schema.Properties["metadata"] = apiextensionsv1.JSONSchemaProps{Type: "object"}
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{
			Name: plural + "." + InfrastructureGroup,
			// The contract label: this API version implements the v1beta2 contract.
			Labels: map[string]string{clusterv1.GroupVersion.String(): InfrastructureVersion},
		},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: InfrastructureGroup,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: plural, Singular: plural[:len(plural)-1], Kind: kind, ListKind: kind + "List",
				Categories: []string{"cluster-api"},
			},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: InfrastructureVersion, Served: true, Storage: true,
				Schema:       &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &schema},
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			}},
		},
	}
}

func machineSpecSchema() apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "object", Required: []string{"node"}, Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"providerID": {Type: "string"},
		"node": {Type: "object", Required: []string{"capacity"}, Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"labels": stringMap(),
			"taints": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
				Type: "object", Required: []string{"key", "effect"},
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"key": {Type: "string"}, "value": {Type: "string"},
					"effect": {Type: "string", Enum: []apiextensionsv1.JSON{
						{Raw: []byte(`"NoSchedule"`)}, {Raw: []byte(`"PreferNoSchedule"`)}, {Raw: []byte(`"NoExecute"`)}}},
				},
			}}},
			"capacity":    quantityMap(),
			"allocatable": quantityMap(),
			"devices": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
				Type: "object", Required: []string{"driver", "count"},
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"driver":     {Type: "string"},
					"count":      {Type: "integer", Minimum: ptr.To[float64](1)},
					"attributes": {Type: "object", XPreserveUnknownFields: ptr.To(true)},
					"capacity":   stringMap(),
				},
			}}},
		}},
		"provisioningDelay": {Type: "string"},
		"failure": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"outOfResources": {Type: "boolean"},
			"code":           {Type: "string", MaxLength: ptr.To[int64](63)},
			"message":        {Type: "string", MaxLength: ptr.To[int64](1024)},
			"failAfter":      {Type: "integer", Minimum: ptr.To[float64](0)},
		}},
	}}
}

func stringMap() apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{
		Allows: true, Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}}
}

func quantityMap() apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{
		Allows: true, Schema: &apiextensionsv1.JSONSchemaProps{
			XIntOrString: true,
			AnyOf:        []apiextensionsv1.JSONSchemaProps{{Type: "integer"}, {Type: "string"}},
			Pattern:      `^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`,
		}}}
}
