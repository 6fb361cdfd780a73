#!/usr/bin/env python3
"""moto's server mode (PyPI moto[server]) on a free loopback port, for scripts/lambda-stack-check: writes the port to
PORT_FILE once it serves, and serves until killed.

Two gaps of moto's CloudFormation are filled, each named where it is: it creates no AWS::Lambda::Url (it warns and
skips the resource, and `!GetAtt ….FunctionUrl` fails), so that resource type is added here, made through moto's own
CreateFunctionUrlConfig and then listed by `aws lambda get-function-url-config` as a real one; and a stack made by a
change set (`aws cloudformation deploy`) gets its outputs and exports.
  python3 scripts/lib/moto_server.py PORT_FILE
"""
import socket
import sys
import time

from moto.awslambda.models import lambda_backends
from moto.core.common_models import CloudFormationModel


class FunctionUrl(CloudFormationModel):
    """AWS::Lambda::Url: its TargetFunctionArn, AuthType, Cors and InvokeMode; attribute FunctionUrl."""

    # moto's model classes name their service by their module (`moto.<service>.…`): this one is Lambda's.
    __module__ = "moto.awslambda.models"

    def __init__(self, config):
        self.config = config

    @staticmethod
    def cloudformation_type():
        return "AWS::Lambda::Url"

    @staticmethod
    def cloudformation_name_type():
        return ""

    @classmethod
    def has_cfn_attr(cls, attr):
        return attr in ("FunctionUrl", "FunctionArn")

    @property
    def physical_resource_id(self):
        return self.config.function.function_arn

    def get_cfn_attribute(self, attribute_name):
        return self.config.to_dict()[attribute_name]

    @classmethod
    def create_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
        properties = cloudformation_json["Properties"]
        config = {key: properties[key] for key in ("AuthType", "Cors", "InvokeMode") if key in properties}
        backend = lambda_backends[account_id][region_name]
        return cls(backend.create_function_url_config(properties["TargetFunctionArn"], config))


def outputs_after_change_sets():
    """moto's CloudFormation reads a stack's outputs from the template it was made with, and a stack made by a change
    set (`aws cloudformation deploy`) is made with none: its outputs and exports stay empty. They are read again
    here once the change set is executed, as CloudFormation does."""
    from moto.cloudformation.models import CloudFormationBackend

    execute = CloudFormationBackend.execute_change_set

    def execute_then_outputs(self, change_set_name, stack_name=None):
        execute(self, change_set_name, stack_name)
        for stack in self.stacks.values():
            if stack.name == stack_name or stack.stack_id == stack_name or stack_name is None:
                stack._parse_template()
                stack.output_map = stack._create_output_map()
                for export in stack.exports:
                    self.exports[export.name] = export

    CloudFormationBackend.execute_change_set = execute_then_outputs


def main():
    from moto.server import ThreadedMotoServer

    outputs_after_change_sets()

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    with open(sys.argv[1], "w") as f:
        f.write(str(port))
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
