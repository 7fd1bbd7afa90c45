"""End-to-end tests of apiregistration.k8s.io/v1 APIServices against a real
`ckube server`: the local APIServices kube-apiserver lists for its own
group-versions (`kubectl get apiservices`: `v1.apps  Local  True`) and for
each group-version a CRD serves, while it serves it; APIServices written
with the official Python client (ApiregistrationV1Api) and with kubectl
1.33, read back with upstream's defaults, shown with their SERVICE and
AVAILABLE columns; invalid ones refused with 422 in kube-aggregator's
words; status only through /status; the built-in ones put back when the
server starts.

Nothing here is proxied: the non-local APIServices name Services that do
not exist (their availability is the aggregator's to report)."""
import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckube_harness import Server, run_unittests  # noqa: E402

from kubernetes import client  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402

SERVER = Server("--controller-manager=false")
setUpModule, tearDownModule = SERVER.start, SERVER.stop
LABEL = "kube-aggregator.kubernetes.io/automanaged"

# The built-in group-versions ckube serves, with kube-apiserver's
# priorities (its apiVersionPriorities).
BUILTIN = {
    "v1.": (18000, 1),
    "v1.apps": (17800, 15),
    "v1.events.k8s.io": (17750, 15),
    "v1.authentication.k8s.io": (17700, 15),
    "v1.authorization.k8s.io": (17600, 15),
    "v1.rbac.authorization.k8s.io": (17000, 15),
    "v1.admissionregistration.k8s.io": (16700, 15),
    "v1.apiextensions.k8s.io": (16700, 15),
    "v1.coordination.k8s.io": (16500, 15),
}

MANIFEST = """\
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1beta1.kubectl.example.com
spec:
  service:
    namespace: kube-system
    name: kubectl-api
  group: kubectl.example.com
  version: v1beta1
  insecureSkipTLSVerify: true
  groupPriorityMinimum: 1000
  versionPriority: 15
"""

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.apis-e2e.example.com"},
    "spec": {
        "group": "apis-e2e.example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {"name": "v1", "served": True, "storage": True,
             "schema": {"openAPIV3Schema": {"type": "object",
                                            "x-kubernetes-preserve-unknown-fields": True}}},
            {"name": "v1alpha1", "served": False, "storage": False,
             "schema": {"openAPIV3Schema": {"type": "object",
                                            "x-kubernetes-preserve-unknown-fields": True}}},
        ],
    },
}


def kubectl(*args, stdin=None):
    return SERVER.kubectl(*args, stdin=stdin)


_CLIENT = []


def api_client():
    """One ApiClient (its connections kept) until the server restarts."""
    if not _CLIENT:
        _CLIENT.append(SERVER.client())
    return _CLIENT[0]


def api():
    return client.ApiregistrationV1Api(api_client())


def rows():
    """`kubectl get apiservices`: name -> [SERVICE, AVAILABLE, AGE]."""
    rc, out, err = kubectl("get", "apiservices")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "SERVICE", "AVAILABLE", "AGE"], out
    table = {}
    for line in lines[1:]:
        # AVAILABLE may read "False (Reason)": split on runs of 2+ spaces
        cells = [c for c in line.split("  ") if c.strip()]
        table[cells[0].strip()] = [c.strip() for c in cells[1:]]
    return table


def wait_for(cond, what, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError("timed out waiting for " + what)


def exists(name):
    try:
        api().read_api_service(name)
        return True
    except ApiException as e:
        if e.status == 404:
            return False
        raise


class APIServicesTest(unittest.TestCase):
    def test_local_apiservices_listed(self):
        table = rows()
        for name in BUILTIN:
            self.assertEqual(table.get(name, [])[:2], ["Local", "True"], (name, table))
        self.assertNotIn("v1.apiregistration.k8s.io", table)
        for item in api().list_api_service().items:
            if item.metadata.name not in BUILTIN:
                continue
            gp, vp = BUILTIN[item.metadata.name]
            self.assertEqual((item.spec.group_priority_minimum, item.spec.version_priority),
                             (gp, vp), item.metadata.name)
            self.assertIsNone(item.spec.service)
            self.assertEqual(item.metadata.labels, {LABEL: "onstart"})
            cond = item.status.conditions[0]
            self.assertEqual((cond.type, cond.status, cond.reason, cond.message),
                             ("Available", "True", "Local",
                              "Local APIServices are always available"))
        self.assertEqual(api().read_api_service("v1.").spec.group, None)

    def test_python_client(self):
        a = api()
        made = a.create_api_service(client.V1APIService(
            metadata=client.V1ObjectMeta(name="v1beta1.metrics.example.com"),
            spec=client.V1APIServiceSpec(
                group="metrics.example.com", version="v1beta1", group_priority_minimum=100,
                version_priority=100, insecure_skip_tls_verify=True,
                service=client.ApiregistrationV1ServiceReference(
                    namespace="kube-system", name="metrics-server"))))
        self.assertEqual(made.spec.service.port, 443)
        self.assertIsNone(made.metadata.generation)
        self.assertIsNone(made.status.conditions)  # the aggregator's to set
        table = rows()
        self.assertEqual(table["v1beta1.metrics.example.com"][0], "kube-system/metrics-server")
        self.assertTrue(table["v1beta1.metrics.example.com"][1] == "Unknown" or
                        table["v1beta1.metrics.example.com"][1].startswith("False"), table)

        # A local one of a user's: available at once, never managed.
        a.create_api_service(client.V1APIService(
            metadata=client.V1ObjectMeta(name="v1.mine.example.com"),
            spec=client.V1APIServiceSpec(group="mine.example.com", version="v1",
                                         group_priority_minimum=500, version_priority=5)))
        self.assertEqual(rows()["v1.mine.example.com"][:2], ["Local", "True"])
        # Status only through /status, spec only through the main resource.
        got = a.patch_api_service("v1.mine.example.com", {
            "spec": {"versionPriority": 6},
            "status": {"conditions": [{"type": "Available", "status": "False"}]}})
        self.assertEqual((got.spec.version_priority, got.status.conditions[0].status), (6, "True"))
        got = a.patch_api_service_status("v1.mine.example.com", {
            "spec": {"versionPriority": 7},
            "status": {"conditions": [{"type": "Available", "status": "False",
                                       "reason": "MissingEndpoints", "message": "x"}]}})
        self.assertEqual((got.spec.version_priority, got.status.conditions[0].status), (6, "False"))
        self.assertEqual(rows()["v1.mine.example.com"][:2], ["Local", "False (MissingEndpoints)"])

        a.delete_api_service("v1beta1.metrics.example.com")
        a.delete_api_service("v1.mine.example.com")
        self.assertFalse(exists("v1beta1.metrics.example.com"))

    def invalid(self, body):
        with self.assertRaises(ApiException) as cm:
            api().create_api_service(body)
        self.assertEqual(cm.exception.status, 422, cm.exception.body)
        st = json.loads(cm.exception.body)
        self.assertEqual(st["reason"], "Invalid")
        return st

    def test_invalid(self):
        def body(name, **spec):
            return {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                    "metadata": {"name": name}, "spec": spec}

        st = self.invalid(body("v1.example.com", group="other.example.com", version="v1",
                               groupPriorityMinimum=100, versionPriority=10))
        self.assertEqual(
            st["message"],
            'APIService.apiregistration.k8s.io "v1.example.com" is invalid: metadata.name: '
            'Invalid value: "v1.example.com": must be `spec.version+"."+spec.group`: '
            '"v1.other.example.com"')
        self.assertEqual(st["details"]["causes"], [{
            "reason": "FieldValueInvalid", "field": "metadata.name",
            "message": 'Invalid value: "v1.example.com": must be `spec.version+"."+spec.group`: '
                       '"v1.other.example.com"'}])

        st = self.invalid(body("v2.", version="v2", groupPriorityMinimum=20001, versionPriority=0,
                               caBundle="aGVsbG8=", insecureSkipTLSVerify=True))
        self.assertEqual(
            [(c["field"], c["message"]) for c in st["details"]["causes"]],
            [("spec.group",
              "Required value: only v1 may have an empty group and it better be legacy kube"),
             ("spec.groupPriorityMinimum",
              "Invalid value: 20001: must be positive and less than 20000"),
             ("spec.versionPriority", "Invalid value: 0: must be positive and less than 1000"),
             ("spec.caBundle",
              'Invalid value: "5 bytes": local APIServices may not have a caBundle'),
             ("spec.insecureSkipTLSVerify",
              "Invalid value: true: local APIServices may not have insecureSkipTLSVerify")])

        st = self.invalid(body("v1.svc.example.com", group="svc.example.com", version="v1",
                               groupPriorityMinimum=1, versionPriority=1, caBundle="aGVsbG8=",
                               insecureSkipTLSVerify=True, service={"port": 70000}))
        self.assertEqual(
            [(c["field"], c["message"]) for c in st["details"]["causes"]],
            [("spec.service.namespace", "Required value"),
             ("spec.service.name", "Required value"),
             ("spec.service.port", "Invalid value: 70000: port is not valid: must be between 1 "
                                   "and 65535, inclusive"),
             ("spec.insecureSkipTLSVerify",
              "Invalid value: true: may not be true if caBundle is present")])
        names = [s.metadata.name for s in api().list_api_service().items]
        self.assertFalse([n for n in names if n in ("v1.example.com", "v2.",
                                                    "v1.svc.example.com")], names)

    def test_kubectl(self):
        rc, out, err = kubectl("apply", "-f", "-", stdin=MANIFEST)
        self.assertEqual(rc, 0, err)
        self.assertIn("apiservice.apiregistration.k8s.io/v1beta1.kubectl.example.com created", out)
        self.assertEqual(rows()["v1beta1.kubectl.example.com"][0], "kube-system/kubectl-api")
        rc, out, err = kubectl("get", "apiservice", "v1beta1.kubectl.example.com", "-o",
                               "jsonpath={.spec.service.port} {.spec.groupPriorityMinimum}")
        self.assertEqual((rc, out), (0, "443 1000"), err)
        # A change applied again; the category lists it.
        rc, out, err = kubectl("apply", "-f", "-",
                               stdin=MANIFEST.replace("versionPriority: 15", "versionPriority: 16"))
        self.assertEqual(rc, 0, err)
        self.assertIn("configured", out)
        rc, out, err = kubectl("get", "api-extensions", "-o", "name")
        self.assertEqual(rc, 0, err)
        self.assertIn("apiservice.apiregistration.k8s.io/v1beta1.kubectl.example.com", out)

        bad = MANIFEST.replace("name: v1beta1.kubectl.example.com",
                               "name: v1beta1.bad.example.com").replace(
            "insecureSkipTLSVerify: true", "caBundle: aGVsbG8=\n  insecureSkipTLSVerify: true")
        rc, out, err = kubectl("apply", "-f", "-", stdin=bad)
        self.assertNotEqual(rc, 0)
        self.assertIn('The APIService "v1beta1.bad.example.com" is invalid: \n'
                      '* metadata.name: Invalid value: "v1beta1.bad.example.com": must be '
                      '`spec.version+"."+spec.group`: "v1beta1.kubectl.example.com"\n'
                      '* spec.insecureSkipTLSVerify: Invalid value: true: may not be true if '
                      'caBundle is present', err)

        rc, out, err = kubectl("explain", "apiservice.spec")
        self.assertEqual(rc, 0, err)
        self.assertIn("KIND:       APIService", out)
        self.assertIn("groupPriorityMinimum\t<integer> -required-", out)

        rc, out, err = kubectl("delete", "-f", "-", stdin=MANIFEST)
        self.assertEqual(rc, 0, err)
        self.assertNotIn("v1beta1.kubectl.example.com", rows())

    def test_crd_apiservices(self):
        ext = client.ApiextensionsV1Api(api_client())
        ext.create_custom_resource_definition(CRD)
        name = "v1.apis-e2e.example.com"
        wait_for(lambda: name in rows(), name + " listed")
        self.assertEqual(rows()[name][:2], ["Local", "True"])
        got = api().read_api_service(name)
        self.assertEqual((got.spec.group_priority_minimum, got.spec.version_priority,
                          got.metadata.labels), (1000, 100, {LABEL: "true"}))
        self.assertNotIn("v1alpha1.apis-e2e.example.com", rows())

        # Served versions come and go with the CRD.
        ext.patch_custom_resource_definition(CRD["metadata"]["name"], [
            {"op": "replace", "path": "/spec/versions/1/served", "value": True}])
        wait_for(lambda: "v1alpha1.apis-e2e.example.com" in rows(), "v1alpha1 listed")
        # Deleted by hand while the CRD serves it: the next change of the
        # CRD makes it again.
        api().delete_api_service("v1alpha1.apis-e2e.example.com")
        ext.patch_custom_resource_definition(CRD["metadata"]["name"], [
            {"op": "add", "path": "/metadata/labels", "value": {"touched": "yes"}}])
        wait_for(lambda: exists("v1alpha1.apis-e2e.example.com"), "v1alpha1 made again")

        ext.delete_custom_resource_definition(CRD["metadata"]["name"])
        wait_for(lambda: not {name, "v1alpha1.apis-e2e.example.com"} & set(rows()),
                 "the CRD's APIServices gone")
        for builtin in BUILTIN:
            self.assertTrue(exists(builtin), builtin)

    def test_restart_puts_builtin_back(self):
        a = api()
        # The built-in ones' specs drifted, one is gone, and a stale one
        # marked as the server's (a group it no longer serves) is there.
        a.patch_api_service("v1.coordination.k8s.io", {"spec": {"groupPriorityMinimum": 1}})
        a.delete_api_service("v1.events.k8s.io")
        a.create_api_service(client.V1APIService(
            metadata=client.V1ObjectMeta(name="v1.batch", labels={LABEL: "onstart"}),
            spec=client.V1APIServiceSpec(group="batch", version="v1",
                                         group_priority_minimum=17400, version_priority=15)))
        a.create_api_service(client.V1APIService(
            metadata=client.V1ObjectMeta(name="v1.stale.example.com", labels={LABEL: "true"}),
            spec=client.V1APIServiceSpec(group="stale.example.com", version="v1",
                                         group_priority_minimum=1000, version_priority=100)))
        SERVER.stop()
        api_client().close()
        _CLIENT.clear()
        SERVER.start()
        a = api()
        self.assertEqual(a.read_api_service("v1.coordination.k8s.io")
                         .spec.group_priority_minimum, 16500)
        self.assertTrue(exists("v1.events.k8s.io"))
        self.assertFalse(exists("v1.batch"))
        self.assertFalse(exists("v1.stale.example.com"))
        table = rows()
        for name in BUILTIN:
            self.assertEqual(table.get(name, [])[:2], ["Local", "True"], (name, table))


if __name__ == "__main__":
    run_unittests()
