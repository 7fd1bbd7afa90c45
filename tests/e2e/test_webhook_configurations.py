"""End-to-end tests of admissionregistration.k8s.io/v1 webhook
configurations against a real `ckube server`: MutatingWebhookConfiguration
and ValidatingWebhookConfiguration written with the official Python client
(AdmissionregistrationV1Api) and with kubectl 1.33 (apply -f), read back
with upstream's v1 defaults filled in, listed by `kubectl get` with the
WEBHOOKS column, and invalid ones refused with 422 in upstream's words.

The webhooks configured here must never be called (an admission chain
calls what they match): their rules name only example.com's "nothings",
which nothing here writes, their URL leads nowhere, and they fail open."""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckube_harness import Server, run_unittests  # noqa: E402

from kubernetes import client  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402

SERVER = Server("--controller-manager=false")
setUpModule, tearDownModule = SERVER.start, SERVER.stop
NOWHERE = "https://127.0.0.1:1/never"


def kubectl(*args, stdin=None):
    return SERVER.kubectl(*args, stdin=stdin)


def api():
    return client.AdmissionregistrationV1Api(SERVER.client())


def nothing_rule():
    """A rule nothing in this test matches."""
    return client.V1RuleWithOperations(operations=["CREATE", "UPDATE"], api_groups=["example.com"],
                                       api_versions=["v1"], resources=["nothings"])


def mutating(name, hook_name="m.example.com", **hook):
    fields = dict(name=hook_name, client_config=client.AdmissionregistrationV1WebhookClientConfig(
        url=NOWHERE), rules=[nothing_rule()], failure_policy="Ignore", side_effects="None",
        admission_review_versions=["v1"])
    fields.update(hook)
    return client.V1MutatingWebhookConfiguration(
        metadata=client.V1ObjectMeta(name=name), webhooks=[client.V1MutatingWebhook(**fields)])


def validating(name, hook_name="v.example.com", **hook):
    fields = dict(name=hook_name, client_config=client.AdmissionregistrationV1WebhookClientConfig(
        url=NOWHERE), rules=[nothing_rule()], failure_policy="Ignore", side_effects="None",
        admission_review_versions=["v1"])
    fields.update(hook)
    return client.V1ValidatingWebhookConfiguration(
        metadata=client.V1ObjectMeta(name=name), webhooks=[client.V1ValidatingWebhook(**fields)])


MANIFEST = """\
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: kubectl-mutating
webhooks:
- name: first.kubectl.example.com
  clientConfig:
    url: %(url)s
  rules:
  - operations: ["CREATE"]
    apiGroups: ["example.com"]
    apiVersions: ["v1"]
    resources: ["nothings"]
  failurePolicy: Ignore
  sideEffects: None
  admissionReviewVersions: ["v1"]
- name: second.kubectl.example.com
  clientConfig:
    service:
      namespace: default
      name: nobody
      path: /mutate
  rules:
  - operations: ["DELETE"]
    apiGroups: ["example.com"]
    apiVersions: ["*"]
    resources: ["nothings/status"]
    scope: Cluster
  failurePolicy: Ignore
  sideEffects: NoneOnDryRun
  admissionReviewVersions: ["v1", "v1beta1"]
  matchConditions:
  - name: never
    expression: "false"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: kubectl-validating
webhooks:
- name: only.kubectl.example.com
  clientConfig:
    url: %(url)s
  rules:
  - operations: ["*"]
    apiGroups: ["example.com"]
    apiVersions: ["v1"]
    resources: ["nothings"]
  failurePolicy: Ignore
  sideEffects: None
  admissionReviewVersions: ["v1"]
  timeoutSeconds: 2
""" % {"url": NOWHERE}


class WebhookConfigurationsTest(unittest.TestCase):
    def test_python_client_defaults(self):
        a = api()
        made = a.create_mutating_webhook_configuration(mutating("py-mutating"))
        self.assertEqual(made.metadata.generation, 1)
        got = a.read_mutating_webhook_configuration("py-mutating")
        hook = got.webhooks[0]
        self.assertEqual(hook.failure_policy, "Ignore")  # given
        self.assertEqual(hook.match_policy, "Equivalent")
        self.assertEqual(hook.reinvocation_policy, "Never")
        self.assertEqual(hook.timeout_seconds, 10)
        self.assertEqual(hook.namespace_selector.to_dict(),
                         {"match_expressions": None, "match_labels": None})
        self.assertIsNotNone(hook.object_selector)
        self.assertEqual(hook.rules[0].scope, "*")
        self.assertEqual(hook.client_config.url, NOWHERE)

        made = a.create_validating_webhook_configuration(validating(
            "py-validating", client_config=client.AdmissionregistrationV1WebhookClientConfig(
                service=client.AdmissionregistrationV1ServiceReference(
                    namespace="default", name="nobody"))))
        hook = a.read_validating_webhook_configuration("py-validating").webhooks[0]
        self.assertEqual(hook.client_config.service.port, 443)
        self.assertEqual(hook.match_policy, "Equivalent")
        self.assertEqual(hook.timeout_seconds, 10)
        names = [c.metadata.name for c in a.list_validating_webhook_configuration().items]
        self.assertIn("py-validating", names)

        # Generation follows the webhooks; a patch merges them by name.
        patched = a.patch_validating_webhook_configuration(
            "py-validating", {"webhooks": [{"name": "v.example.com", "timeoutSeconds": 4}]})
        self.assertEqual(patched.metadata.generation, 2)
        self.assertEqual(len(patched.webhooks), 1)
        self.assertEqual(patched.webhooks[0].timeout_seconds, 4)
        self.assertEqual(patched.webhooks[0].client_config.service.name, "nobody")

        a.delete_mutating_webhook_configuration("py-mutating")
        a.delete_validating_webhook_configuration("py-validating")
        with self.assertRaises(ApiException) as cm:
            a.read_mutating_webhook_configuration("py-mutating")
        self.assertEqual(cm.exception.status, 404)

    def invalid(self, create, body):
        with self.assertRaises(ApiException) as cm:
            create(body)
        self.assertEqual(cm.exception.status, 422, cm.exception.body)
        st = json.loads(cm.exception.body)
        self.assertEqual(st["reason"], "Invalid")
        return st

    def test_python_client_invalid(self):
        a = api()
        st = self.invalid(a.create_mutating_webhook_configuration,
                          mutating("bad-name", hook_name="example"))
        self.assertEqual(st["message"],
                         'MutatingWebhookConfiguration.admissionregistration.k8s.io "bad-name" is '
                         'invalid: webhooks[0].name: Invalid value: "example": should be a domain '
                         'with at least three segments separated by dots')
        self.assertEqual(st["details"]["causes"], [{
            "reason": "FieldValueInvalid", "field": "webhooks[0].name",
            "message": 'Invalid value: "example": should be a domain with at least three segments '
                       'separated by dots'}])

        st = self.invalid(a.create_validating_webhook_configuration, validating(
            "bad-url", client_config=client.AdmissionregistrationV1WebhookClientConfig(
                url="http://user@127.0.0.1:1/never?x=1#y"),
            timeout_seconds=31, failure_policy="Sometimes"))
        self.assertEqual(
            [(c["field"], c["message"]) for c in st["details"]["causes"]],
            [("webhooks[0].failurePolicy",
              'Unsupported value: "Sometimes": supported values: "Fail", "Ignore"'),
             ("webhooks[0].timeoutSeconds",
              "Invalid value: 31: the timeout value must be between 1 and 30 seconds"),
             ("webhooks[0].clientConfig.url",
              "Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: "
              "https://host[/path]"),
             ("webhooks[0].clientConfig.url",
              'Invalid value: "user": user information is not permitted in the URL'),
             ("webhooks[0].clientConfig.url",
              'Invalid value: "y": fragments are not permitted in the URL'),
             ("webhooks[0].clientConfig.url",
              'Invalid value: "x=1": query parameters are not permitted in the URL')])

        bad_rule = client.V1RuleWithOperations(operations=["*", "CREATE"],
                                               api_groups=["example.com"], api_versions=["v1"],
                                               resources=["*", "nothings"])
        st = self.invalid(a.create_mutating_webhook_configuration, mutating(
            "bad-rules", rules=[bad_rule], reinvocation_policy="Twice",
            client_config=client.AdmissionregistrationV1WebhookClientConfig(
                url=NOWHERE, service=client.AdmissionregistrationV1ServiceReference(
                    namespace="default", name="nobody"))))
        self.assertEqual(
            [(c["field"], c["message"]) for c in st["details"]["causes"]],
            [("webhooks[0].rules[0].operations",
              'Invalid value: []admissionregistration.OperationType{"*", "CREATE"}: if \'*\' is '
              'present, must not specify other operations'),
             ("webhooks[0].rules[0].resources",
              'Invalid value: []string{"*", "nothings"}: if \'*\' is present, must not specify '
              'other resources without subresources'),
             ("webhooks[0].reinvocationPolicy",
              'Unsupported value: "Twice": supported values: "IfNeeded", "Never"'),
             ("webhooks[0].clientConfig",
              "Required value: exactly one of url or service is required")])

        # sideEffects and admissionReviewVersions are required in v1 (the
        # Python client's models insist on them too: a raw body).
        body = {"apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "bad-required"},
                "webhooks": [{"name": "a.example.com", "clientConfig": {"url": NOWHERE},
                              "rules": [nothing_rule().to_dict()]},
                             {"name": "a.example.com", "clientConfig": {"url": NOWHERE},
                              "sideEffects": "Some", "admissionReviewVersions": ["v2"]}]}
        body["webhooks"][0]["rules"] = [{"operations": ["CREATE"], "apiGroups": ["example.com"],
                                         "apiVersions": ["v1"], "resources": ["nothings"]}]
        st = self.invalid(a.create_validating_webhook_configuration, body)
        self.assertEqual(
            [(c["field"], c["message"]) for c in st["details"]["causes"]],
            [("webhooks[0].sideEffects", "Required value: must specify one of None, NoneOnDryRun"),
             ("webhooks[0].admissionReviewVersions",
              "Required value: must specify one of v1, v1beta1"),
             ("webhooks[1].sideEffects",
              'Unsupported value: "Some": supported values: "None", "NoneOnDryRun"'),
             ("webhooks[1].admissionReviewVersions",
              'Invalid value: []string{"v2"}: must include at least one of v1, v1beta1'),
             ("webhooks[1].name", 'Duplicate value: "a.example.com"')])
        names = [c.metadata.name for c in a.list_validating_webhook_configuration().items]
        self.assertFalse([n for n in names if n.startswith("bad-")], names)

    def test_kubectl(self):
        rc, out, err = kubectl("apply", "-f", "-", stdin=MANIFEST)
        self.assertEqual(rc, 0, err)
        self.assertIn("mutatingwebhookconfiguration.admissionregistration.k8s.io/kubectl-mutating "
                      "created", out)
        self.assertIn("validatingwebhookconfiguration.admissionregistration.k8s.io/"
                      "kubectl-validating created", out)

        rc, out, err = kubectl("get", "mutatingwebhookconfigurations")
        self.assertEqual(rc, 0, err)
        lines = out.splitlines()
        self.assertEqual(lines[0].split(), ["NAME", "WEBHOOKS", "AGE"])
        row = [line.split() for line in lines[1:] if line.startswith("kubectl-mutating ")]
        self.assertEqual(len(row), 1, out)
        self.assertEqual(row[0][1], "2")
        rc, out, err = kubectl("get", "validatingwebhookconfiguration", "kubectl-validating")
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.splitlines()[1].split()[:2], ["kubectl-validating", "1"])

        # The defaults, read back.
        rc, out, err = kubectl("get", "mutatingwebhookconfiguration", "kubectl-mutating",
                               "-o", "json")
        self.assertEqual(rc, 0, err)
        hooks = json.loads(out)["webhooks"]
        first, second = hooks
        self.assertEqual((first["matchPolicy"], first["timeoutSeconds"],
                          first["reinvocationPolicy"], first["rules"][0]["scope"],
                          first["namespaceSelector"], first["objectSelector"]),
                         ("Equivalent", 10, "Never", "*", {}, {}))
        self.assertEqual(second["clientConfig"]["service"],
                         {"namespace": "default", "name": "nobody", "path": "/mutate",
                          "port": 443})
        self.assertEqual(second["rules"][0]["scope"], "Cluster")
        self.assertEqual(second["matchConditions"], [{"name": "never", "expression": "false"}])
        rc, out, err = kubectl("get", "validatingwebhookconfiguration", "kubectl-validating",
                               "-o", "jsonpath={.webhooks[0].timeoutSeconds} "
                               "{.webhooks[0].failurePolicy} {.webhooks[0].matchPolicy}")
        self.assertEqual((rc, out), (0, "2 Ignore Equivalent"), err)

        # Applying again changes nothing. (kubectl still sends the rules:
        # an atomic list, and the server's has the defaulted scope the
        # manifest leaves out, so it says "configured", as against
        # kube-apiserver.) A changed webhook is merged in.
        rc, out, err = kubectl("apply", "-f", "-", stdin=MANIFEST)
        self.assertEqual(rc, 0, err)
        rc, out, err = kubectl("get", "mutatingwebhookconfiguration", "kubectl-mutating",
                               "-o", "json")
        self.assertEqual(rc, 0, err)
        again = json.loads(out)
        self.assertEqual(again["metadata"]["generation"], 1)
        self.assertEqual(again["webhooks"], hooks)
        changed = MANIFEST.replace("timeoutSeconds: 2", "timeoutSeconds: 3")
        rc, out, err = kubectl("apply", "-f", "-", stdin=changed)
        self.assertEqual(rc, 0, err)
        self.assertIn("kubectl-validating configured", out)
        rc, out, err = kubectl("get", "validatingwebhookconfiguration", "kubectl-validating",
                               "-o", "jsonpath={.webhooks[0].timeoutSeconds} "
                               "{.metadata.generation}")
        self.assertEqual((rc, out), (0, "3 2"), err)

        # Upstream's words, as kubectl shows them.
        bad = MANIFEST.split("---\n")[1].replace("kubectl-validating", "kubectl-bad").replace(
            "only.kubectl.example.com", "only-kubectl").replace("timeoutSeconds: 2",
                                                                "timeoutSeconds: 0")
        rc, out, err = kubectl("apply", "-f", "-", stdin=bad)
        self.assertNotEqual(rc, 0)
        self.assertIn('The ValidatingWebhookConfiguration "kubectl-bad" is invalid: \n'
                      '* webhooks[0].name: Invalid value: "only-kubectl": should be a domain with '
                      'at least three segments separated by dots\n'
                      '* webhooks[0].timeoutSeconds: Invalid value: 0: the timeout value must be '
                      'between 1 and 30 seconds', err)

        rc, out, err = kubectl("explain", "mutatingwebhookconfiguration.webhooks.clientConfig")
        self.assertEqual(rc, 0, err)
        self.assertIn("KIND:       MutatingWebhookConfiguration", out)
        self.assertIn("service\t<ServiceReference>", out)

        rc, out, err = kubectl("delete", "-f", "-", stdin=MANIFEST)
        self.assertEqual(rc, 0, err)
        rc, out, err = kubectl("get", "mutatingwebhookconfigurations,validatingwebhookconfigurations",
                               "-o", "name")
        self.assertEqual(rc, 0, err)
        self.assertNotIn("kubectl-", out)


if __name__ == "__main__":
    run_unittests()
